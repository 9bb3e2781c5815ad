#include "agent/fleet/fleet_efficiency.h"

#include <algorithm>
#include <bit>
#include <map>

#include "agent/runs/series_cap.h"

namespace seqpoint::daemon::fleet {

SlBin OctaveOf(uint32_t seq_len) {
  if (seq_len == 0) return {};
  const uint32_t lo = std::bit_floor(seq_len);
  const uint32_t hi = lo >= (1u << 31) ? UINT32_MAX : 2 * lo - 1;
  return {lo, hi};
}

std::string BinLabel(const SlBin& bin) {
  return std::to_string(bin.lo) + "-" + std::to_string(bin.hi);
}

std::vector<BinCost> MainBins(const std::vector<HistogramBin>& histogram, size_t max_bins) {
  std::map<uint32_t, BinCost> by_lo;
  for (const HistogramBin& h : histogram) {
    const SlBin bin = OctaveOf(h.seq_len);
    if (bin.lo == 0 || h.count == 0) continue;
    BinCost& c = by_lo[bin.lo];
    c.bin = bin;
    c.iterations += h.count;
    // Time is summed over the timed iterations only (an iteration without a begin has none):
    // the work beside it is theirs. time_count 0 with a time: a store from before it was kept.
    const uint64_t timed = h.time_count > 0 || h.time_ns_sum == 0 ? h.time_count : h.count;
    c.work += static_cast<double>(timed) * h.seq_len;
    c.time_s += h.time_ns_sum * 1e-9;
    c.energy_iterations += h.energy_count;
    c.energy_work += static_cast<double>(h.energy_count) * h.seq_len;
    c.energy_j += h.energy_uj_sum * 1e-6;
  }
  std::vector<BinCost> out;
  for (const auto& [lo, c] : by_lo) {
    if (c.iterations >= kMinBinIterations) out.push_back(c);
  }
  // The most work first; ties by SL, so the choice is the same from scrape to scrape.
  std::sort(out.begin(), out.end(), [](const BinCost& a, const BinCost& b) {
    return a.work != b.work ? a.work > b.work : a.bin.lo < b.bin.lo;
  });
  if (out.size() > max_bins) out.resize(max_bins);
  return out;
}

std::string FleetJob(const std::string& run_key, const RunJobLabels& job) {
  if (!job.launcher_run.empty()) return "run:" + job.launcher_run;
  if (!job.slurm_job_id.empty()) return "slurm:" + job.slurm_job_id;
  if (!job.job_name.empty()) return "name:" + job.job_name;
  return run_key.substr(0, kMaxLabelBytes);
}

std::vector<MetricFamily> EfficiencyFamilies(RunManager& runs, const FleetOptions& options) {
  auto iterations = Counter("seqpoint_fleet_bin_iterations_total",
                            "Iterations of a run in one of its main SL bins (octaves of SL; the "
                            "bins with the most work, at most 3), since the run began.");
  auto work = Counter("seqpoint_fleet_bin_work_total",
                      "The work of those iterations that were timed: the sum of their SL (x the "
                      "batch, when fixed, is tokens). Cost per unit of work: rate(time) / "
                      "rate(work).");
  auto time = Counter("seqpoint_fleet_bin_time_seconds_total",
                      "The time of those iterations (begin to end, from the probes).");
  auto energy = Counter("seqpoint_fleet_bin_energy_joules_total",
                        "The energy of those iterations that a device gave one (energy_sampler.h); "
                        "absent without an energy source.");
  auto energy_work = Counter("seqpoint_fleet_bin_energy_work_total",
                             "The work (sum of SL) of the iterations that were given an energy: "
                             "energy per unit of work is rate(energy) / rate(energy_work).");
  std::vector<MetricFamily*> all = {&iterations, &work, &time, &energy, &energy_work};
  SeriesCap cap(all, options.max_series);
  for (const auto& [id, tracker] : runs.runs()) {
    cap.Begin();
    const RunSnapshot s = tracker->Snapshot(1'000'000'000);
    const std::string fleet_job = FleetJob(s.run.key, runs.JobLabels(id));
    for (const BinCost& c : MainBins(s.histogram)) {
      const Labels l = {{"run", std::to_string(id)},
                        {"node", options.node},
                        {"fleet_job", fleet_job},
                        {"bin", BinLabel(c.bin)}};
      iterations.Add(l, static_cast<double>(c.iterations));
      work.Add(l, c.work);
      time.Add(l, c.time_s);
      if (c.energy_iterations > 0) {
        energy.Add(l, c.energy_j);
        energy_work.Add(l, c.energy_work);
      }
    }
    cap.Commit();
  }
  if (options.ledger != nullptr) {
    options.ledger->exported += cap.kept();
    options.ledger->dropped += cap.dropped();
  }
  return {iterations, work, time, energy, energy_work};
}

}  // namespace seqpoint::daemon::fleet
