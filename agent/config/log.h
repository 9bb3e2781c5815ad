// Leveled logging to stderr for seqpointd. Under systemd (JOURNAL_STREAM set) each line starts
// with the sd-daemon priority prefix "<3>".."<7>" so the journal records the level and adds its
// own timestamp; elsewhere a line is "2024-05-01T12:00:00.123Z warn message".
//
// Threads: the level is an atomic; one fprintf per line, so lines from threads never interleave
// mid-line (stdio locks the stream per call).
#pragma once

#include <string_view>

#include "agent/config/config.h"

namespace seqpoint::daemon {

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, std::string_view message);

}  // namespace seqpoint::daemon

// Formats only when the level is on: SEQPOINT_LOG(kInfo, "run " + id + " opened").
#define SEQPOINT_LOG(level, expr)                                               \
  do {                                                                          \
    if (::seqpoint::daemon::LogEnabled(::seqpoint::daemon::LogLevel::level)) {  \
      ::seqpoint::daemon::LogLine(::seqpoint::daemon::LogLevel::level, (expr)); \
    }                                                                           \
  } while (0)
