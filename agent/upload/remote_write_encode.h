// Metric families -> Prometheus remote-write requests: protobuf (remote_write.proto, lite
// runtime) compressed with snappy's block format, as the remote-write spec requires. Each
// request holds at most max_samples samples; labels are sorted with __name__ among them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/metrics/metric_family.h"
#include "common/status.h"

namespace seqpoint::daemon {

struct EncodedBatch {
  std::string payload;  // snappy(protobuf WriteRequest)
  int64_t samples = 0;
};

// extra: labels added to every series (upload.labels, instance), not overriding series labels.
std::vector<EncodedBatch> EncodeRemoteWrite(const std::vector<MetricFamily>& families,
                                            const Labels& extra, int64_t timestamp_ms,
                                            int64_t max_samples);

// The inverse, for tests: snappy-decompresses and parses, returning (labels, value, ts) rows.
struct DecodedSample {
  Labels labels;  // sorted, __name__ included
  double value = 0;
  int64_t timestamp_ms = 0;
};
Result<std::vector<DecodedSample>> DecodeRemoteWrite(const std::string& payload);

}  // namespace seqpoint::daemon
