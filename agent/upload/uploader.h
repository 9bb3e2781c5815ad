// Remote-write upload of the projections (docs/architecture.md): every upload.interval_s
// the sampler's families are encoded (remote_write_encode.h) into the on-disk spool (Store),
// and a sender drains the spool oldest first, one request at a time.
//
// Delivery: at-least-once. A batch leaves the spool only after a 2xx (or a 4xx other than 429:
// the endpoint will never take it, e.g. samples too old; counted as rejected). Failures (refused,
// timeout, TLS, 5xx, 429, and 401/403/404/407: the config is wrong, not the batch) retry the same
// batch with exponential backoff from upload.backoff_initial_ms
// doubling to upload.backoff_max_s, with +-20% jitter so a fleet does not retry in lockstep.
// Each retry is also the probe of whether the endpoint is back, so the cap is low (5 s by
// default, Prometheus' own remote-write max_backoff): after an outage of any length the spool
// starts draining within ~6 s of the endpoint's return (a 300 s cap once meant minutes), at the
// cost of one small request per node every few seconds while the endpoint is down.
// The spool survives restarts; it is bounded by upload.spool_max_bytes, dropping the oldest
// batches first (counted; see store_spool.cpp). Sending stays ordered, so each series' samples
// reach the endpoint in timestamp order, as Prometheus requires.
//
// https:// endpoints, client certificates and credentials: upload_security.h. A TLS or
// credential failure (wrong CA, unreadable token file) is a failure like any other: logged,
// counted in seqpoint_upload_failures_total, retried with backoff; the spool keeps every batch
// until a reload fixes the config.
//
// Threads: runs on the daemon's io_context.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "agent/config/config_validate.h"
#include "agent/upload/http_post.h"
#include "agent/metrics/metric_family.h"
#include "agent/store/store.h"
#include "agent/upload/upload_security.h"

namespace seqpoint::daemon {

struct UploaderOptions {
  std::string url;         // http[s]://host:port/path
  UploadTlsOptions tls;    // for https://
  UploadAuthOptions auth;  // Authorization header, from files
  int64_t interval_s = 15;
  int64_t timeout_s = 10;
  int64_t backoff_initial_ms = 500;
  int64_t backoff_max_s = 5;
  int64_t spool_max_bytes = 64 << 20;
  int64_t batch_max_samples = 2000;
  Labels labels;  // added to every series
};

struct UploaderStats {
  uint64_t sent_batches = 0;
  uint64_t sent_samples = 0;
  uint64_t failures = 0;          // attempts that will be retried
  uint64_t rejected_batches = 0;  // 4xx: dropped
  int64_t dropped_batches = 0;    // spool overflow, over the spool's lifetime
  double last_success_unix = 0;
  int64_t backoff_ms = 0;  // current retry delay; 0 when healthy
  std::string last_error;
};

class Uploader {
 public:
  using Sampler = std::function<std::vector<MetricFamily>()>;
  static Result<std::unique_ptr<Uploader>> Create(boost::asio::io_context& io, Store* store,
                                                  UploaderOptions options, Sampler sampler);
  ~Uploader();
  void Start();
  void Stop();
  // Spools these families now (e.g. the final projection of a run that just closed).
  void SpoolNow(const std::vector<MetricFamily>& families);
  // Sends now if waiting for a retry (a reload may have fixed what failed: a CA or token file).
  void RetryNow();
  const UploaderStats& stats() const { return stats_; }
  Result<SpoolStats> spool() const { return store_->SpoolStatus(); }
  const UploaderOptions& options() const { return options_; }

 private:
  Uploader(boost::asio::io_context& io, Store* store, UploaderOptions options, HttpUrl url,
           Sampler sampler);
  void ScheduleSample();
  void TrySend();
  void OnSent(int64_t batch_id, int64_t samples, Result<HttpResponse> result);
  void RetryLater(const std::string& error);

  boost::asio::io_context& io_;
  Store* store_;
  UploaderOptions options_;
  HttpUrl url_;
  Sampler sampler_;
  std::unique_ptr<UploadTls> tls_;  // https:// only
  boost::asio::steady_timer sample_timer_;
  boost::asio::steady_timer retry_timer_;
  bool sending_ = false;
  bool waiting_retry_ = false;
  uint64_t retry_generation_ = 0;  // tells a cancelled retry timer's handler it is stale
  bool stopped_ = true;
  UploaderStats stats_;
  std::minstd_rand jitter_{std::random_device{}()};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace seqpoint::daemon
