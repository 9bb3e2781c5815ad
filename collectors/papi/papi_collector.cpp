#include "collectors/papi/papi_collector.h"

#include <papi.h>

#include <map>

#include "collectors/papi/papi_library.h"

namespace seqpoint::collectors {

// One PAPI event set of one component; cleaned up and destroyed on destruction.
class PapiEventSet {
 public:
  static Result<std::unique_ptr<PapiEventSet>> Create(int component,
                                                      const std::vector<PapiEvent>& events,
                                                      pid_t attach_pid) {
    auto set = std::unique_ptr<PapiEventSet>(new PapiEventSet());
    int r = PAPI_create_eventset(&set->handle_);
    if (r != PAPI_OK) return Unavailable("PAPI_create_eventset: " + PapiErrorText(r));
    r = PAPI_assign_eventset_component(set->handle_, component);
    if (r != PAPI_OK) return Unavailable("PAPI_assign_eventset_component: " + PapiErrorText(r));
    if (attach_pid > 0) {
      r = PAPI_attach(set->handle_, static_cast<unsigned long>(attach_pid));
      if (r != PAPI_OK) {
        return Unavailable("PAPI_attach(pid " + std::to_string(attach_pid) +
                           "): " + PapiErrorText(r));
      }
      PAPI_option_t opt{};
      opt.inherit.eventset = set->handle_;
      opt.inherit.inherit = PAPI_INHERIT_ALL;
      r = PAPI_set_opt(PAPI_INHERIT, &opt);
      if (r != PAPI_OK) set->note_ = "PAPI_INHERIT refused: " + PapiErrorText(r);
    }
    for (const PapiEvent& e : events) {
      r = PAPI_add_event(set->handle_, e.code);
      if (r != PAPI_OK) {
        return Unavailable("PAPI_add_event(" + e.name + "): " + PapiErrorText(r));
      }
      set->names_.push_back(e.name);
    }
    return set;
  }

  ~PapiEventSet() {
    if (running_) {
      std::vector<long long> v(names_.size());
      PAPI_stop(handle_, v.data());
    }
    if (handle_ != PAPI_NULL) {
      PAPI_cleanup_eventset(handle_);
      PAPI_destroy_eventset(&handle_);
    }
  }

  Status Start() {
    int r = PAPI_start(handle_);
    if (r != PAPI_OK) return Unavailable("PAPI_start: " + PapiErrorText(r));
    running_ = true;
    return Status::Ok();
  }

  Result<std::vector<long long>> Stop() {
    std::vector<long long> v(names_.size());
    int r = PAPI_stop(handle_, v.data());
    running_ = false;
    if (r != PAPI_OK) {
      return Unavailable("PAPI_stop: " + PapiErrorText(r) +
                         " (the device or process may have gone away)");
    }
    return v;
  }

  const std::vector<std::string>& names() const { return names_; }
  const std::string& note() const { return note_; }

 private:
  PapiEventSet() = default;
  int handle_ = PAPI_NULL;
  bool running_ = false;
  std::vector<std::string> names_;
  std::string note_;
};

PapiCollector::PapiCollector(PapiOptions options) : options_(std::move(options)) {}
PapiCollector::~PapiCollector() { Close(); }

size_t PapiCollector::group_count() const {
  size_t g = 1;
  for (const ComponentSets& c : components_) g = std::max(g, c.sets.size());
  return g;
}

Status PapiCollector::SelectGroup(size_t group) {
  if (group >= group_count()) {
    return InvalidArgument("papi: group " + std::to_string(group) + " of " +
                           std::to_string(group_count()));
  }
  if (!running_.empty()) return Internal("papi: SelectGroup during a measurement");
  current_group_ = group;
  return Status::Ok();
}

Status PapiCollector::Open(const Target& target) {
  Close();
  if (options_.events.empty()) {
    return NotFound("papi: no events configured (set collectors.papi.events)");
  }
  SEQPOINT_RETURN_IF_ERROR(EnsurePapi());

  std::vector<RejectedEvent> rejected;
  std::map<int, std::vector<PapiEvent>> by_component;
  std::vector<int> component_order;
  for (const std::string& name : options_.events) {
    Result<PapiEvent> ev = ResolvePapiEvent(name);
    if (!ev.ok()) {
      rejected.push_back({name, ev.status()});
      continue;
    }
    if (!by_component.count(ev->component)) component_order.push_back(ev->component);
    by_component[ev->component].push_back(*ev);
  }

  for (int cidx : component_order) {
    Result<PapiComponent> info = PapiComponentInfo(cidx);
    if (!info.ok()) continue;
    const std::vector<PapiEvent>& events = by_component[cidx];
    std::map<std::string, PapiEvent> lookup;
    std::vector<std::string> names;
    for (const PapiEvent& e : events) {
      lookup[e.name] = e;
      names.push_back(e.name);
    }
    const pid_t attach = (info->attach && target.pid > 0) ? target.pid : 0;
    auto events_of = [&](std::span<const std::string> group) {
      std::vector<PapiEvent> out;
      for (const std::string& n : group) out.push_back(lookup[n]);
      return out;
    };
    ComponentSets cs;
    cs.component = cidx;
    cs.component_name = info->name;
    cs.attached = attach > 0;
    cs.groups = SplitIntoGroups(names, 0, [&](std::span<const std::string> group) {
      return PapiEventSet::Create(cidx, events_of(group), attach).status();
    });
    for (const RejectedEvent& r : cs.groups.rejected) rejected.push_back(r);
    for (const auto& group : cs.groups.groups) {
      Result<std::unique_ptr<PapiEventSet>> set =
          PapiEventSet::Create(cidx, events_of(group), attach);
      if (!set.ok()) {
        rejected.push_back({group.front(), set.status()});
        continue;
      }
      if (!(*set)->note().empty()) {
        rejected.push_back({cs.component_name, Unsupported((*set)->note())});
      }
      cs.sets.push_back(std::move(set).value());
    }
    if (!cs.sets.empty()) components_.push_back(std::move(cs));
  }

  warnings_.clear();
  // A name PAPI does not know is the config's fault; an event this machine cannot count now
  // (no PMU, a VM that advertises counters it cannot open) is not.
  bool config_error = false;
  for (const RejectedEvent& r : rejected) {
    warnings_ += (warnings_.empty() ? "" : "; ") + r.reason.message();
    config_error |= r.reason.code() == ErrorCode::kInvalidArgument ||
                    r.reason.code() == ErrorCode::kNotFound;
  }
  if (components_.empty()) {
    Status s = !config_error
                   ? Unsupported("papi: no configured event can be counted here: " + warnings_)
                   : InvalidArgument("papi: no configured event can be counted: " + warnings_);
    Close();
    return s;
  }
  current_group_ = 0;
  return Status::Ok();
}

Status PapiCollector::Begin() {
  if (components_.empty()) return Internal("papi: Begin() before a successful Open()");
  running_.clear();
  for (ComponentSets& c : components_) {
    PapiEventSet* set = c.sets[current_group_ % c.sets.size()].get();
    Status s = set->Start();
    if (!s.ok()) {
      for (auto& [r, component] : running_) (void)r->Stop();
      running_.clear();
      return s.WithContext("papi: component " + c.component_name);
    }
    running_.push_back({set, &c});
  }
  return Status::Ok();
}

Result<std::vector<Sample>> PapiCollector::End() {
  if (running_.empty()) return Internal("papi: End() without Begin()");
  std::vector<Sample> out;
  Status first_error;
  for (auto& [set, component] : running_) {
    Result<std::vector<long long>> v = set->Stop();
    if (!v.ok()) {
      if (first_error.ok()) first_error = v.status();
      continue;
    }
    for (size_t i = 0; i < v->size(); ++i) {
      Sample sample{"papi:" + set->names()[i], static_cast<double>((*v)[i]), "count"};
      // A component that cannot attach to a process (rapl, nvml, net, ...) counts its
      // device, whichever process asked.
      if (!component->attached) {
        sample.scope = SampleScope::kDevice;
        sample.device = "papi:" + component->component_name;
      }
      out.push_back(std::move(sample));
    }
  }
  running_.clear();
  if (!first_error.ok()) return first_error;
  return out;
}

void PapiCollector::Close() {
  running_.clear();
  components_.clear();  // destroys the event sets (stopping any still running)
  current_group_ = 0;
}

std::string PapiCollector::Describe() const {
  std::string d = "papi:";
  for (const ComponentSets& c : components_) {
    d += " " + c.component_name + (c.attached ? " (attached, main thread + inherited)" : "") +
         " [" + DescribeGroups(c.groups) + "]";
  }
  return d;
}

}  // namespace seqpoint::collectors
