// See corpus.h. The ".xz" path runs `xz -dc -- FILE` with posix_spawnp (no shell, so any file
// name is safe) and reads its stdout through a pipe.
#include "examples/corpus.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

extern char** environ;

namespace seqpoint::examples {
namespace {

bool IsAsciiPunct(unsigned char c) { return c < 0x80 && std::ispunct(c); }
bool IsSeparator(unsigned char c) { return c <= 0x20 || c == 0x7f; }

constexpr std::string_view kFormatHint =
    "; a corpus is UTF-8 text with one pair a line, English<TAB>German[<TAB>source] "
    "(plain .tsv or .tsv.xz), e.g. share/seqpoint/corpora/ende_fillets.tsv";

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// NotFound / IoError naming the file unless `path` is a readable regular file (or pipe).
Status CheckReadable(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || access(path.c_str(), R_OK) != 0) {
    int err = errno;
    return Status(
        err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIoError,
        "cannot open corpus '" + path + "': " + std::strerror(err) + std::string(kFormatHint));
  }
  if (S_ISDIR(st.st_mode)) {
    return InvalidArgument("corpus '" + path + "' is a directory" + std::string(kFormatHint));
  }
  return Status::Ok();
}

Result<std::string> ReadPlainFile(const std::string& path) {
  SEQPOINT_RETURN_IF_ERROR(CheckReadable(path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open corpus '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError("reading corpus '" + path + "' failed");
  return text.str();
}

// `xz -dc -- path`, whole output. xz prints its own diagnostic on stderr.
Result<std::string> ReadXzFile(const std::string& path) {
  SEQPOINT_RETURN_IF_ERROR(CheckReadable(path));
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return IoError(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  const char* argv[] = {"xz", "-dc", "--", path.c_str(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "xz", &actions, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return NotFound("cannot run 'xz' to decompress corpus '" + path + "': " + std::strerror(rc) +
                    "; install xz-utils or pass a decompressed .tsv");
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return InvalidArgument("'xz -dc' failed on corpus '" + path +
                           "' (see its message above); is it an .xz file?" +
                           std::string(kFormatHint));
  }
  return text;
}

}  // namespace

std::vector<std::string> Tokenize(std::string_view text) {
  std::vector<std::string> tokens;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) tokens.push_back(std::move(word));
    word.clear();
  };
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (IsSeparator(c)) {
      flush();
    } else if (IsAsciiPunct(c)) {
      flush();
      tokens.emplace_back(1, ch);
    } else {
      word.push_back(c < 0x80 ? static_cast<char>(std::tolower(c)) : ch);
    }
  }
  flush();
  return tokens;
}

Vocabulary Vocabulary::Build(const std::vector<std::vector<std::string>>& sentences,
                             size_t max_words) {
  std::map<std::string, uint64_t> counts;  // ordered: ties resolve in byte order
  for (const auto& s : sentences) {
    for (const auto& w : s) ++counts[w];
  }
  std::vector<std::pair<std::string, uint64_t>> ranked(counts.begin(), counts.end());
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (ranked.size() > max_words) ranked.resize(max_words);
  Vocabulary v;
  v.words_ = {"<pad>", "<unk>", "<s>", "</s>"};
  for (auto& [word, count] : ranked) {
    v.ids_.emplace(word, static_cast<int32_t>(v.words_.size()));
    v.words_.push_back(word);
  }
  return v;
}

int32_t Vocabulary::Lookup(const std::string& word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? kUnkId : it->second;
}

Result<std::vector<std::string>> ReadCorpusLines(const std::string& path) {
  Result<std::string> text = EndsWith(path, ".xz") ? ReadXzFile(path) : ReadPlainFile(path);
  if (!text.ok()) return text.status();
  std::vector<std::string> lines;
  std::string_view rest = *text;
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.emplace_back(line);
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return lines;
}

Result<Corpus> BuildCorpus(const std::vector<std::string>& lines, std::string_view source,
                           const CorpusOptions& options) {
  if (options.max_len == 0) return InvalidArgument("--max-len must be at least 1");
  std::vector<std::vector<std::string>> src_tokens, tgt_tokens;
  Corpus corpus;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.empty()) continue;  // a trailing blank line is not a pair
    ++corpus.lines;
    size_t tab = line.find('\t');
    if (tab == std::string_view::npos) {
      return InvalidArgument(std::string(source) + ":" + std::to_string(i + 1) +
                             ": no TAB between English and German" + std::string(kFormatHint));
    }
    size_t tab2 = line.find('\t', tab + 1);
    auto en = Tokenize(line.substr(0, tab));
    auto de =
        Tokenize(line.substr(tab + 1, tab2 == std::string_view::npos ? tab2 : tab2 - tab - 1));
    if (en.empty() || de.empty()) {
      ++corpus.skipped_empty;
      continue;
    }
    if (en.size() > options.max_len || de.size() > options.max_len) ++corpus.truncated;
    if (en.size() > options.max_len) en.resize(options.max_len);
    if (de.size() > options.max_len) de.resize(options.max_len);
    src_tokens.push_back(std::move(en));
    tgt_tokens.push_back(std::move(de));
  }
  if (src_tokens.empty()) {
    return InvalidArgument(std::string(source) + ": no sentence pair with words on both sides" +
                           std::string(kFormatHint));
  }
  corpus.src_vocab = Vocabulary::Build(src_tokens, options.max_words);
  corpus.tgt_vocab = Vocabulary::Build(tgt_tokens, options.max_words);
  corpus.pairs.resize(src_tokens.size());
  for (size_t i = 0; i < src_tokens.size(); ++i) {
    for (const auto& w : src_tokens[i]) corpus.pairs[i].src.push_back(corpus.src_vocab.Lookup(w));
    for (const auto& w : tgt_tokens[i]) corpus.pairs[i].tgt.push_back(corpus.tgt_vocab.Lookup(w));
  }
  return corpus;
}

Result<Corpus> LoadCorpus(const std::string& path, const CorpusOptions& options) {
  auto lines = ReadCorpusLines(path);
  if (!lines.ok()) return lines.status();
  return BuildCorpus(*lines, path, options);
}

}  // namespace seqpoint::examples
