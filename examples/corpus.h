// Parallel text for the example training workload: reading, tokenizing, vocabularies.
//
// A corpus file is UTF-8 text, one pair a line: English<TAB>German[<TAB>source...]; a name
// ending in ".xz" is decompressed through `xz -dc` (xz-utils). Tokenization is by words: ASCII
// letters are lowercased, every ASCII punctuation character is a token of its own, ASCII
// whitespace and control characters separate tokens, and all other bytes (digits, letters, and
// every non-ASCII UTF-8 byte) join into words. Non-ASCII letters keep their case ("Ä" stays),
// which is enough for a timing workload and keeps the code free of a Unicode library.
//
// Ids: 0 = padding, 1 = unknown word, 2 = begin of sentence, 3 = end of sentence; words follow,
// most frequent first (ties in byte order), so the same file always gives the same ids.
// Nothing here uses libtorch or threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace seqpoint::examples {

constexpr int32_t kPadId = 0;
constexpr int32_t kUnkId = 1;
constexpr int32_t kBosId = 2;
constexpr int32_t kEosId = 3;
constexpr int32_t kFirstWordId = 4;

std::vector<std::string> Tokenize(std::string_view text);

class Vocabulary {
 public:
  // The `max_words` most frequent tokens of `sentences` (plus the four special ids).
  static Vocabulary Build(const std::vector<std::vector<std::string>>& sentences, size_t max_words);
  int32_t Lookup(const std::string& word) const;  // kUnkId when absent
  size_t size() const { return words_.size(); }   // including the special ids
  const std::string& word(int32_t id) const { return words_[static_cast<size_t>(id)]; }

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> ids_;
};

// One training pair as ids, truncated to max_len; no begin/end markers.
struct SentencePair {
  std::vector<int32_t> src;
  std::vector<int32_t> tgt;
};

struct CorpusOptions {
  size_t max_words = 8000;  // vocabulary cap per language, excluding the special ids
  size_t max_len = 100;     // tokens kept per sentence (longer ones are truncated)
};

struct Corpus {
  std::vector<SentencePair> pairs;
  Vocabulary src_vocab;      // English
  Vocabulary tgt_vocab;      // German
  size_t lines = 0;          // data lines read
  size_t skipped_empty = 0;  // pairs dropped because one side has no token
  size_t truncated = 0;      // pairs with a side cut to max_len
};

// Reads the lines of `path` (decompressing ".xz"). Errors name the file and the fix.
Result<std::vector<std::string>> ReadCorpusLines(const std::string& path);
// Splits, tokenizes and encodes. `source` names the input in errors ("file:line").
Result<Corpus> BuildCorpus(const std::vector<std::string>& lines, std::string_view source,
                           const CorpusOptions& options);
Result<Corpus> LoadCorpus(const std::string& path, const CorpusOptions& options);

}  // namespace seqpoint::examples
