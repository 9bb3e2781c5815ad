// libFuzzer target: the iteration-trace CSV parser must reject or accept any bytes without a
// crash, a sanitizer report, or a hang, whatever it is fed.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/trace_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  uint64_t rows = 0;
  for (bool metrics : {true, false}) {
    seqpoint::TraceReadOptions o;
    o.read_metrics = metrics;
    (void)seqpoint::ParseTrace(
        text, "fuzz.csv", o, [](const seqpoint::TraceSchema&) { return seqpoint::Status::Ok(); },
        [&](const seqpoint::TraceRow& r) {
          rows += r.seq_len > 0 ? 1 : 0;
          return seqpoint::Status::Ok();
        });
  }
  return 0;
}
