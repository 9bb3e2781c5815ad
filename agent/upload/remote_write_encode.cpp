#include "agent/upload/remote_write_encode.h"

#include <snappy.h>

#include <algorithm>

#include "remote_write.pb.h"

namespace seqpoint::daemon {
namespace {

EncodedBatch Finish(const prompb::WriteRequest& request, int64_t samples) {
  std::string raw;
  request.SerializeToString(&raw);
  EncodedBatch out;
  snappy::Compress(raw.data(), raw.size(), &out.payload);
  out.samples = samples;
  return out;
}

prompb::MetricMetadata::MetricType TypeOf(const std::string& type) {
  if (type == "counter") return prompb::MetricMetadata::COUNTER;
  if (type == "gauge") return prompb::MetricMetadata::GAUGE;
  return prompb::MetricMetadata::UNKNOWN;
}

}  // namespace

std::vector<EncodedBatch> EncodeRemoteWrite(const std::vector<MetricFamily>& families,
                                            const Labels& extra, int64_t timestamp_ms,
                                            int64_t max_samples) {
  std::vector<EncodedBatch> out;
  prompb::WriteRequest request;
  int64_t in_request = 0;
  for (const MetricFamily& f : families) {
    if (f.samples.empty()) continue;
    auto* meta = request.add_metadata();
    meta->set_type(TypeOf(f.type));
    meta->set_metric_family_name(f.name);
    meta->set_help(f.help);
    for (const MetricSample& s : f.samples) {
      Labels labels = s.labels;
      labels.emplace_back("__name__", f.name);
      for (const auto& [k, v] : extra) {
        bool present =
            std::any_of(labels.begin(), labels.end(), [&](const auto& l) { return l.first == k; });
        if (!present) labels.emplace_back(k, v);
      }
      std::sort(labels.begin(), labels.end());
      auto* ts = request.add_timeseries();
      for (const auto& [k, v] : labels) {
        auto* l = ts->add_labels();
        l->set_name(k);
        l->set_value(v);
      }
      auto* sample = ts->add_samples();
      sample->set_value(s.value);
      sample->set_timestamp(timestamp_ms);
      if (++in_request >= max_samples) {
        out.push_back(Finish(request, in_request));
        request.Clear();
        in_request = 0;
      }
    }
  }
  if (in_request > 0) out.push_back(Finish(request, in_request));
  return out;
}

Result<std::vector<DecodedSample>> DecodeRemoteWrite(const std::string& payload) {
  std::string raw;
  if (!snappy::Uncompress(payload.data(), payload.size(), &raw)) {
    return InvalidArgument("remote-write payload is not snappy block data");
  }
  prompb::WriteRequest request;
  if (!request.ParseFromString(raw)) {
    return InvalidArgument("remote-write payload is not a WriteRequest");
  }
  std::vector<DecodedSample> out;
  for (const auto& ts : request.timeseries()) {
    Labels labels;
    for (const auto& l : ts.labels()) labels.emplace_back(l.name(), l.value());
    for (const auto& s : ts.samples()) out.push_back({labels, s.value(), s.timestamp()});
  }
  return out;
}

}  // namespace seqpoint::daemon
