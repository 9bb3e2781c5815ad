#include "collectors/perf/perf_event_names.h"

#include <charconv>

namespace seqpoint::collectors {
namespace {

struct NamedEvent {
  std::string_view name;
  uint32_t type;
  uint64_t config;
};

constexpr NamedEvent kSoftware[] = {
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
    {"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"alignment-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_ALIGNMENT_FAULTS},
    {"emulation-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_EMULATION_FAULTS},
};

constexpr NamedEvent kHardware[] = {
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branch-instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
    {"bus-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BUS_CYCLES},
    {"stalled-cycles-frontend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
    {"stalled-cycles-backend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
    {"ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES},
};

// Hardware cache events: "<cache>-<op>-<result>" as perf names them
// (include/uapi/linux/perf_event.h: config = id | op << 8 | result << 16).
struct CacheName {
  std::string_view name;
  uint64_t id;
};
constexpr CacheName kCaches[] = {
    {"L1-dcache", PERF_COUNT_HW_CACHE_L1D}, {"L1-icache", PERF_COUNT_HW_CACHE_L1I},
    {"LLC", PERF_COUNT_HW_CACHE_LL},        {"dTLB", PERF_COUNT_HW_CACHE_DTLB},
    {"iTLB", PERF_COUNT_HW_CACHE_ITLB},     {"branch", PERF_COUNT_HW_CACHE_BPU},
    {"node", PERF_COUNT_HW_CACHE_NODE},
};
constexpr CacheName kCacheOps[] = {
    {"loads", PERF_COUNT_HW_CACHE_OP_READ},          {"stores", PERF_COUNT_HW_CACHE_OP_WRITE},
    {"prefetches", PERF_COUNT_HW_CACHE_OP_PREFETCH}, {"load", PERF_COUNT_HW_CACHE_OP_READ},
    {"store", PERF_COUNT_HW_CACHE_OP_WRITE},         {"prefetch", PERF_COUNT_HW_CACHE_OP_PREFETCH},
};
constexpr CacheName kCacheResults[] = {
    {"", PERF_COUNT_HW_CACHE_RESULT_ACCESS},
    {"-misses", PERF_COUNT_HW_CACHE_RESULT_MISS},
};

PerfEventSpec Make(std::string_view name, uint32_t type, uint64_t config) {
  PerfEventSpec spec;
  spec.name = std::string(name);
  spec.attr.type = type;
  spec.attr.config = config;
  spec.software = type == PERF_TYPE_SOFTWARE;
  spec.unit = (type == PERF_TYPE_SOFTWARE &&
               (config == PERF_COUNT_SW_TASK_CLOCK || config == PERF_COUNT_SW_CPU_CLOCK))
                  ? "ns"
                  : "count";
  return spec;
}

}  // namespace

Result<PerfEventSpec> ParsePerfEvent(std::string_view name) {
  for (const NamedEvent& e : kSoftware) {
    if (e.name == name) return Make(name, e.type, e.config);
  }
  for (const NamedEvent& e : kHardware) {
    if (e.name == name) return Make(name, e.type, e.config);
  }
  for (const CacheName& c : kCaches) {
    for (const CacheName& op : kCacheOps) {
      for (const CacheName& res : kCacheResults) {
        std::string full = std::string(c.name) + "-" + std::string(op.name) + std::string(res.name);
        if (full == name) {
          return Make(name, PERF_TYPE_HW_CACHE, c.id | (op.id << 8) | (res.id << 16));
        }
      }
    }
  }
  if (name.size() > 1 && name[0] == 'r') {
    uint64_t config = 0;
    auto [p, ec] = std::from_chars(name.data() + 1, name.data() + name.size(), config, 16);
    if (ec == std::errc() && p == name.data() + name.size()) {
      return Make(name, PERF_TYPE_RAW, config);
    }
  }
  return InvalidArgument("unknown perf event '" + std::string(name) +
                         "': use a perf generic name (task-clock, page-faults, "
                         "context-switches, cpu-migrations, cycles, instructions, cache-misses, "
                         "L1-dcache-load-misses, ...) or a raw PMU event r<hex>");
}

std::vector<std::string> KnownPerfEventNames() {
  std::vector<std::string> out;
  for (const NamedEvent& e : kSoftware) out.emplace_back(e.name);
  for (const NamedEvent& e : kHardware) out.emplace_back(e.name);
  for (const CacheName& c : kCaches) {
    for (size_t op = 0; op < 3; ++op) {
      for (const CacheName& res : kCacheResults) {
        out.push_back(std::string(c.name) + "-" + std::string(kCacheOps[op].name) +
                      std::string(res.name));
      }
    }
  }
  return out;
}

}  // namespace seqpoint::collectors
