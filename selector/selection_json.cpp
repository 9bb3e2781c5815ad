#include "selector/selection_json.h"

#include <nlohmann/json.hpp>
#include <unordered_set>

namespace seqpoint::selector {

using nlohmann::json;

std::string SelectionToJson(const Selection& s, int indent) {
  json points = json::array();
  for (const SeqPoint& p : s.points) {
    json j = {{"iter", p.iter},
              {"iters", p.iters},
              {"seq_len", p.seq_len},
              {"weight", p.weight},
              {"bin", {p.bin_lo, p.bin_hi}},
              {"mean_cost", p.mean_cost},
              {"rep_cost", p.rep_cost}};
    if (!p.groups.empty()) j["groups"] = p.groups;
    points.push_back(std::move(j));
  }
  json out = {{"iterations", s.iterations},         {"method", s.method},
              {"cost_proxy", s.cost_proxy},         {"budget", s.budget},
              {"measured", s.measured()},           {"proxy_error_pct", s.proxy_error_pct},
              {"counter_groups", s.counter_groups}, {"seqpoints", std::move(points)}};
  return out.dump(indent);
}

namespace {

Result<Selection> Parse(std::string_view text, std::string_view source) {
  const std::string src(source);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgument(src +
                           ": not valid JSON; expected the output of 'seqpoint select --json'");
  }
  auto bad = [&](const std::string& what) {
    return InvalidArgument(src + ": " + what +
                           " (is this the output of 'seqpoint select --json'?)");
  };
  if (!j.is_object() || !j.contains("iterations") || !j["iterations"].is_number_unsigned() ||
      !j.contains("seqpoints") || !j["seqpoints"].is_array()) {
    return bad("missing 'iterations' (a non-negative integer) or 'seqpoints' (an array)");
  }
  Selection s;
  s.iterations = j["iterations"].get<uint64_t>();
  s.method = j.value("method", std::string("unknown"));
  s.cost_proxy = j.value("cost_proxy", std::string("seq_len*batch"));
  s.budget = j.value("budget", uint64_t{0});
  s.proxy_error_pct = j.value("proxy_error_pct", 0.0);
  s.counter_groups = j.value("counter_groups", 1u);
  uint64_t weights = 0;
  std::unordered_set<uint64_t> seen;
  size_t index = 0;
  for (const json& pj : j["seqpoints"]) {
    const std::string where = "seqpoints[" + std::to_string(index++) + "]";
    if (!pj.is_object() || !pj.contains("iter") || !pj["iter"].is_number_unsigned() ||
        !pj.contains("weight") || !pj["weight"].is_number_unsigned() || !pj.contains("seq_len") ||
        !pj["seq_len"].is_number_unsigned()) {
      return bad(where + " needs unsigned integers 'iter', 'seq_len' and 'weight'");
    }
    SeqPoint p;
    p.iter = pj["iter"].get<uint64_t>();
    p.seq_len = pj["seq_len"].get<uint32_t>();
    p.weight = pj["weight"].get<uint64_t>();
    if (pj.contains("iters")) {
      if (!pj["iters"].is_array()) return bad(where + ".iters must be an array of iterations");
      for (const json& it : pj["iters"]) {
        if (!it.is_number_unsigned()) return bad(where + ".iters must hold unsigned integers");
        p.iters.push_back(it.get<uint64_t>());
      }
    } else {
      p.iters = {p.iter};
    }
    if (p.iters.empty() || p.iters.front() != p.iter) {
      return bad(where + ": 'iters' must start with the representative 'iter'");
    }
    for (uint64_t it : p.iters) {
      if (!seen.insert(it).second) {
        return bad(where + ": iteration " + std::to_string(it) + " is listed in two places");
      }
    }
    if (pj.contains("bin")) {
      const json& b = pj["bin"];
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_unsigned() ||
          !b[1].is_number_unsigned() || b[0].get<uint64_t>() > b[1].get<uint64_t>()) {
        return bad(where + ".bin must be [lo, hi] with lo <= hi");
      }
      p.bin_lo = b[0].get<uint32_t>();
      p.bin_hi = b[1].get<uint32_t>();
    } else {
      p.bin_lo = p.bin_hi = p.seq_len;
    }
    p.mean_cost = pj.value("mean_cost", static_cast<double>(p.seq_len));
    p.rep_cost = pj.value("rep_cost", p.mean_cost);
    if (pj.contains("groups") && pj["groups"].is_array()) {
      for (const json& g : pj["groups"]) p.groups.push_back(g.get<uint32_t>());
      if (p.groups.size() != p.iters.size()) return bad(where + ".groups must match .iters");
    }
    weights += p.weight;
    s.points.push_back(std::move(p));
  }
  if (s.points.empty()) return bad("the selection has no SeqPoints");
  if (weights != s.iterations) {
    return bad("the weights sum to " + std::to_string(weights) + " but 'iterations' is " +
               std::to_string(s.iterations));
  }
  return s;
}

}  // namespace

Result<Selection> SelectionFromJson(std::string_view text, std::string_view source) {
  try {
    return Parse(text, source);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type or range
    return InvalidArgument(std::string(source) + ": " + e.what() +
                           " (is this the output of 'seqpoint select --json'?)");
  }
}

}  // namespace seqpoint::selector
