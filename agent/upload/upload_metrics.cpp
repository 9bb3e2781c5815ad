#include "agent/upload/upload_metrics.h"

namespace seqpoint::daemon {

std::vector<MetricFamily> UploadFamilies(const Uploader& uploader) {
  const UploaderStats& u = uploader.stats();
  std::vector<MetricFamily> out;
  out.push_back(Counter("seqpoint_upload_sent_batches_total", "Remote-write requests accepted.")
                    .Add({}, static_cast<double>(u.sent_batches)));
  out.push_back(Counter("seqpoint_upload_sent_samples_total", "Samples accepted by the endpoint.")
                    .Add({}, static_cast<double>(u.sent_samples)));
  out.push_back(Counter("seqpoint_upload_failures_total", "Failed attempts, retried later.")
                    .Add({}, static_cast<double>(u.failures)));
  out.push_back(Counter("seqpoint_upload_rejected_batches_total",
                        "Batches the endpoint refused with a 4xx (dropped).")
                    .Add({}, static_cast<double>(u.rejected_batches)));
  out.push_back(Counter("seqpoint_upload_dropped_batches_total",
                        "Batches dropped because the spool was full (oldest first).")
                    .Add({}, static_cast<double>(u.dropped_batches)));
  out.push_back(Gauge("seqpoint_upload_backoff_seconds", "Current retry delay; 0 when healthy.")
                    .Add({}, static_cast<double>(u.backoff_ms) / 1000.0));
  out.push_back(Gauge("seqpoint_upload_last_success_timestamp_seconds",
                      "Unix time of the last accepted request.")
                    .Add({}, u.last_success_unix));
  if (auto spool = uploader.spool(); spool.ok()) {
    out.push_back(Gauge("seqpoint_upload_spool_batches", "Batches waiting in the spool.")
                      .Add({}, static_cast<double>(spool->batches)));
    out.push_back(Gauge("seqpoint_upload_spool_bytes", "Bytes waiting in the spool.")
                      .Add({}, static_cast<double>(spool->bytes)));
  }
  return out;
}

}  // namespace seqpoint::daemon
