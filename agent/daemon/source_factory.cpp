#include "agent/daemon/source_factory.h"

#include "agent/config/log.h"
#include "agent/source/trace_replay_source.h"
#include "collectors/registry.h"

namespace seqpoint::daemon {

DaemonParts MakeDaemonParts(const ReplaySpec& replay) {
  DaemonParts parts;
  if (!replay.traces.empty()) {
    parts.source = [replay](boost::asio::io_context& io,
                            const DaemonConfig&) -> Result<std::unique_ptr<IterationSource>> {
      std::vector<ReplayProcess> procs;
      pid_t pid = 1000000;  // above pid_max's default: never a live process
      for (const std::string& spec : replay.traces) {
        ReplayProcess p;
        size_t at = spec.rfind('@');
        p.trace_path = at == std::string::npos ? spec : spec.substr(0, at);
        p.run_key = at == std::string::npos ? "replay:" + p.trace_path : spec.substr(at + 1);
        p.pid = pid++;
        p.crash_at_end = replay.crash_at_end;
        p.exit_at_end = replay.exit_at_end;
        p.first_row = replay.first_row;
        p.max_rows = replay.max_rows;
        procs.push_back(std::move(p));
      }
      auto src = TraceReplaySource::Create(io, std::move(procs),
                                           {replay.rows_per_step, replay.step_delay_us, replay.repeat});
      if (!src.ok()) return src.status();
      (*src)->set_on_finished([] { SEQPOINT_LOG(kInfo, "replay finished"); });
      return std::unique_ptr<IterationSource>(std::move(*src));
    };
    parts.collectors = [](const DaemonConfig&, IterationSource* source) -> CollectorSetFactory {
      auto* replay_source = static_cast<TraceReplaySource*>(source);
      return [replay_source] {
        std::vector<std::unique_ptr<collectors::Collector>> v;
        v.push_back(std::make_unique<ReplayCollector>(replay_source));
        return v;
      };
    };
    return parts;
  }
  parts.source = [](boost::asio::io_context& io, const DaemonConfig& config) {
    return MakeLiveSource(io, config);
  };
  // Every enabled collector of the registry, built afresh for each process measured.
  parts.collectors = [](const DaemonConfig& config, IterationSource*) -> CollectorSetFactory {
    collectors::CollectorConfig cc = config.collectors;
    return [cc] {
      std::vector<std::unique_ptr<collectors::Collector>> v;
      for (const collectors::CollectorInfo& info : collectors::CollectorRegistry()) {
        if (collectors::IsCollectorEnabled(info, cc)) v.push_back(info.factory(cc));
      }
      return v;
    };
  };
  return parts;
}

}  // namespace seqpoint::daemon
