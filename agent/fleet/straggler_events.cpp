// See straggler_events.h.
#include "agent/fleet/straggler_events.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace seqpoint::daemon::fleet {

Result<std::vector<RecordedEvent>> ReadRecordedEvents(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read recorded straggler events " + path);
  std::vector<RecordedEvent> out;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    RecordedEvent e;
    words >> e.kind >> e.pid;
    bool ok = !words.fail();
    if (e.kind == 'R') {
      ok = ok && static_cast<bool>(words >> e.rank);
    } else if (e.kind == 'I') {
      ok = ok && static_cast<bool>(words >> e.iter >> e.tokens >> e.a >> e.b);
    } else if (e.kind == 'A') {
      ok = ok && static_cast<bool>(words >> e.a);
    } else {
      ok = false;
    }
    if (!ok) {
      return InvalidArgument(path + ":" + std::to_string(n) + ": not 'R pid rank', 'I pid iter " +
                             "tokens begin end' or 'A pid ts': " + line);
    }
    out.push_back(e);
  }
  return out;
}

uint64_t LastTimestamp(const std::vector<RecordedEvent>& events) {
  uint64_t last = 0;
  for (const RecordedEvent& e : events) last = std::max({last, e.a, e.b});
  return last;
}

void ReplayRecordedEvents(const std::vector<RecordedEvent>& events, int64_t run,
                          int64_t shift_ns, StragglerBook* book) {
  auto at = [shift_ns](uint64_t ts) { return static_cast<uint64_t>(static_cast<int64_t>(ts) + shift_ns); };
  for (const RecordedEvent& e : events) {
    if (e.kind == 'R') {
      book->AddRank(run, e.pid, e.rank);
    } else if (e.kind == 'I') {
      book->OnIteration(e.pid, e.iter, e.tokens, at(e.a), at(e.b));
    } else {
      book->OnArrival(e.pid, at(e.a));
    }
  }
}

}  // namespace seqpoint::daemon::fleet
