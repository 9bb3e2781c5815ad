#include "agent/config/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace seqpoint::daemon {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

bool UnderJournal() {
  static const bool journal = std::getenv("JOURNAL_STREAM") != nullptr;
  return journal;
}

int SyslogPriority(LogLevel level) {  // <sys/syslog.h>: LOG_ERR 3, WARNING 4, INFO 6, DEBUG 7
  switch (level) {
    case LogLevel::kError:
      return 3;
    case LogLevel::kWarn:
      return 4;
    case LogLevel::kInfo:
      return 6;
    case LogLevel::kDebug:
      return 7;
  }
  return 6;
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }
bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(); }

void LogLine(LogLevel level, std::string_view message) {
  int len = static_cast<int>(message.size());
  if (UnderJournal()) {
    std::fprintf(stderr, "<%d>%.*s\n", SyslogPriority(level), len, message.data());
    return;
  }
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string_view name = LogLevelName(level);
  std::fprintf(stderr, "%s.%03dZ %-5.*s %.*s\n", stamp, static_cast<int>(ms.count()),
               static_cast<int>(name.size()), name.data(), len, message.data());
}

}  // namespace seqpoint::daemon
