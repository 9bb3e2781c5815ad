#include "agent/upload/uploader.h"
#include "common/clock.h"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "agent/upload/http_post.h"
#include "agent/config/log.h"
#include "agent/upload/remote_write_encode.h"

namespace seqpoint::daemon {
namespace {

int64_t NowMs() { return WallNs() / 1'000'000; }

}  // namespace

Result<std::unique_ptr<Uploader>> Uploader::Create(boost::asio::io_context& io, Store* store,
                                                   UploaderOptions options, Sampler sampler) {
  auto url = ParseHttpUrl(options.url);
  if (!url.ok()) return url.status().WithContext("upload.url");
  std::unique_ptr<UploadTls> tls;
  if (url->tls) {
    auto t = UploadTls::Create(options.tls, url->host);
    if (!t.ok()) return t.status();
    tls = std::move(*t);
    if (options.tls.insecure_skip_verify) {
      SEQPOINT_LOG(
          kWarn, "upload: upload.tls_insecure_skip_verify = true: the certificate of " + url->host +
                     " is NOT verified; anyone on the network path can read and change the "
                     "upload. Use upload.tls_ca_file instead, outside tests");
    }
  } else if (options.auth.any()) {
    SEQPOINT_LOG(kWarn, "upload: credentials are sent to " + url->host +
                            " over plain http://: anyone on the network path can read them; use "
                            "https:// in upload.url");
  }
  // Unreadable credential files are config errors at start (the daemon validates them too).
  if (auto auth = ReadAuthorization(options.auth); !auth.ok()) return auth.status();
  auto dropped = store->GetCounter("spool_dropped_batches");
  std::unique_ptr<Uploader> u(
      new Uploader(io, store, std::move(options), std::move(*url), std::move(sampler)));
  u->tls_ = std::move(tls);
  if (dropped.ok()) u->stats_.dropped_batches = *dropped;
  return u;
}

Uploader::Uploader(boost::asio::io_context& io, Store* store, UploaderOptions options, HttpUrl url,
                   Sampler sampler)
    : io_(io),
      store_(store),
      options_(std::move(options)),
      url_(std::move(url)),
      sampler_(std::move(sampler)),
      sample_timer_(io),
      retry_timer_(io) {}

Uploader::~Uploader() {
  Stop();
  *alive_ = false;
}

void Uploader::Start() {
  stopped_ = false;
  ScheduleSample();
  TrySend();  // whatever a previous daemon left in the spool
}

void Uploader::Stop() {
  stopped_ = true;
  sample_timer_.cancel();
  retry_timer_.cancel();
}

void Uploader::ScheduleSample() {
  sample_timer_.expires_after(std::chrono::seconds(options_.interval_s));
  std::weak_ptr<bool> alive = alive_;
  sample_timer_.async_wait([this, alive](boost::system::error_code ec) {
    auto a = alive.lock();
    if (ec || !a || !*a || stopped_) return;
    SpoolNow(sampler_());
    ScheduleSample();
  });
}

void Uploader::SpoolNow(const std::vector<MetricFamily>& families) {
  for (EncodedBatch& b :
       EncodeRemoteWrite(families, options_.labels, NowMs(), options_.batch_max_samples)) {
    auto dropped = store_->SpoolPush(b.payload, b.samples, options_.spool_max_bytes);
    if (!dropped.ok()) {
      stats_.last_error = dropped.status().message();
      SEQPOINT_LOG(kError, "upload spool: " + dropped.status().message());
      continue;
    }
    if (*dropped > 0) {
      stats_.dropped_batches += *dropped;
      SEQPOINT_LOG(kWarn, "upload spool full (upload.spool_max_bytes = " +
                              std::to_string(options_.spool_max_bytes) + "): dropped the " +
                              std::to_string(*dropped) + " oldest batch(es)");
    }
  }
  if (!stopped_) TrySend();
}

void Uploader::TrySend() {
  if (sending_ || waiting_retry_ || stopped_) return;
  auto batch = store_->SpoolOldest();
  if (!batch.ok()) {
    RetryLater(batch.status().message());
    return;
  }
  if (!batch->has_value()) return;  // spool empty: the next SpoolNow wakes us
  sending_ = true;
  const int64_t id = (*batch)->id;
  const int64_t samples = (*batch)->samples;
  HttpHeaders headers = {{"Content-Encoding", "snappy"},
                         {"Content-Type", "application/x-protobuf"},
                         {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
  // Credentials and certificates are read again for every request (rotation needs no reload).
  auto auth = ReadAuthorization(options_.auth);
  Result<TlsClientConfig> tls = TlsClientConfig{};
  if (tls_) tls = tls_->Current();
  if (!auth.ok() || !tls.ok()) {
    sending_ = false;
    RetryLater((auth.ok() ? tls.status() : auth.status()).message());
    return;
  }
  if (*auth) headers.emplace_back("Authorization", std::move(**auth));
  std::weak_ptr<bool> alive = alive_;
  HttpPost(io_, url_, std::move((*batch)->payload), std::move(headers),
           std::chrono::seconds(options_.timeout_s), tls_ ? &*tls : nullptr,
           [this, alive, id, samples](Result<HttpResponse> r) {
             auto a = alive.lock();
             if (!a || !*a) return;
             OnSent(id, samples, std::move(r));
           });
}

void Uploader::OnSent(int64_t id, int64_t samples, Result<HttpResponse> result) {
  sending_ = false;
  if (stopped_) return;
  if (!result.ok()) {
    (void)store_->SpoolCountAttempt(id);
    RetryLater(result.status().message());
    return;
  }
  const int status = result->status;
  if (status >= 200 && status < 300) {
    (void)store_->SpoolDelete(id);
    ++stats_.sent_batches;
    stats_.sent_samples += static_cast<uint64_t>(samples);
    stats_.last_success_unix = static_cast<double>(NowMs()) / 1000.0;
    if (stats_.backoff_ms > 0) SEQPOINT_LOG(kInfo, "upload: " + url_.host + " reachable again");
    stats_.backoff_ms = 0;
    stats_.last_error.clear();
    TrySend();
    return;
  }
  std::string body = result->body.substr(0, 300);
  while (!body.empty() && std::isspace(static_cast<unsigned char>(body.back()))) body.pop_back();
  if (status == 401 || status == 403 || status == 404 || status == 407) {
    // The config is wrong, not the batch: keep it spooled until a reload fixes the config.
    (void)store_->SpoolCountAttempt(id);
    RetryLater("HTTP " + std::to_string(status) + ": " + body + " (" +
               (status == 404 ? "no remote-write receiver at this path: fix upload.url"
                              : "the endpoint refused the credentials: check "
                                "upload.bearer_token_file or upload.basic_auth_*") +
               ")");
    return;
  }
  if (status >= 400 && status < 500 && status != 429) {
    // Remote-write spec: a 4xx will fail again; drop the batch rather than block the spool.
    (void)store_->SpoolDelete(id);
    (void)store_->AddCounter("upload_rejected_batches", 1);
    ++stats_.rejected_batches;
    stats_.last_error = "HTTP " + std::to_string(status) + ": " + body;
    SEQPOINT_LOG(kWarn, "upload: endpoint rejected a batch of " + std::to_string(samples) +
                            " samples (HTTP " + std::to_string(status) + "): " + body);
    TrySend();
    return;
  }
  (void)store_->SpoolCountAttempt(id);
  RetryLater("HTTP " + std::to_string(status) + ": " + body);
}

void Uploader::RetryLater(const std::string& error) {
  ++stats_.failures;
  const int64_t max_ms = options_.backoff_max_s * 1000;
  int64_t next = stats_.backoff_ms == 0 ? options_.backoff_initial_ms
                                        : std::min(max_ms, stats_.backoff_ms * 2);
  if (stats_.backoff_ms == 0 || stats_.last_error != error) {
    SEQPOINT_LOG(kWarn, "upload to " + options_.url + " failed: " + error + "; retrying in " +
                            std::to_string(next) + " ms (batches stay spooled)");
  }
  stats_.backoff_ms = next;
  stats_.last_error = error;
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  auto delay =
      std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(next) * jitter(jitter_)));
  waiting_retry_ = true;
  retry_timer_.expires_after(delay);
  std::weak_ptr<bool> alive = alive_;
  const uint64_t generation = ++retry_generation_;
  retry_timer_.async_wait([this, alive, generation](boost::system::error_code ec) {
    auto a = alive.lock();
    if (!a || !*a || generation != retry_generation_) return;  // stale: RetryNow() came first
    waiting_retry_ = false;
    if (!ec) TrySend();
  });
}

void Uploader::RetryNow() {
  if (!waiting_retry_ || stopped_) return;
  ++retry_generation_;
  retry_timer_.cancel();
  waiting_retry_ = false;
  TrySend();
}

}  // namespace seqpoint::daemon
