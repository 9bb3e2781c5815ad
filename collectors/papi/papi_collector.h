// PAPI collector: event sets built from configured PAPI event names of any component
// (perf_event presets and natives, rocm / rocp_sdk, cuda, nvml, rocm_smi, sde).
//
// - One event set per component (PAPI allows one component per event set). A component that
//   can attach (cmpinfo->attach: perf_event) is attached to the target process with
//   PAPI_attach and PAPI_INHERIT_ALL, so threads and children created later are counted;
//   PAPI attaches to one thread, so threads that existed before Open other than the main one
//   are not counted (a PAPI limit, named in Describe()). Other components count device-wide
//   (GPU components) or in-process (sde).
// - Events that do not fit one event set (PAPI_add_event fails: PAPI_ECNFLCT, PAPI_ECOUNT)
//   are split into groups with SplitIntoGroups, probing with a real event set; visit k
//   measures, for each component, its group k mod G_c (group_count() = max G_c).
// - An unknown event or a disabled component is dropped with PAPI's own reason (warnings());
//   when every event is dropped, Open fails with all the reasons: Unsupported when only
//   disabled components are to blame (absent here), InvalidArgument otherwise (fix the config).
//
// Threads: driven by one thread (PAPI counts per thread unless attached).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectors/collector.h"
#include "collectors/collector_config.h"
#include "collectors/counter_groups.h"

namespace seqpoint::collectors {

class PapiEventSet;

class PapiCollector : public Collector {
 public:
  explicit PapiCollector(PapiOptions options);
  ~PapiCollector() override;

  std::string_view name() const override { return "papi"; }
  Status Open(const Target& target) override;
  Status Begin() override;
  Result<std::vector<Sample>> End() override;
  void Close() override;

  size_t group_count() const override;
  Status SelectGroup(size_t group) override;
  size_t current_group() const override { return current_group_; }
  std::string warnings() const override { return warnings_; }
  std::string Describe() const override;

 private:
  struct ComponentSets {
    int component = -1;
    std::string component_name;
    bool attached = false;
    EventGroups groups;
    std::vector<std::unique_ptr<PapiEventSet>> sets;  // one per group
  };

  PapiOptions options_;
  std::vector<ComponentSets> components_;
  // The sets started by Begin(), each with its component (whose scope its samples take).
  std::vector<std::pair<PapiEventSet*, const ComponentSets*>> running_;
  size_t current_group_ = 0;
  std::string warnings_;
};

}  // namespace seqpoint::collectors
