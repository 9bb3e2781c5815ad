// Corpus reading, tokenizing and vocabularies, on hand-made lines and on the real corpora.
#include "examples/corpus.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

using seqpoint::ErrorCode;
using namespace seqpoint::examples;

namespace {

std::string TempFile(const std::string& contents, const char* suffix) {
  std::string path = "/tmp/seqpoint_corpus_testXXXXXX" + std::string(suffix);
  int fd = mkstemps(path.data(), static_cast<int>(std::char_traits<char>::length(suffix)));
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, contents.data(), contents.size()) == static_cast<ssize_t>(contents.size()));
  close(fd);
  return path;
}

}  // namespace

TEST_CASE("examples corpus: words are lowercased, ASCII punctuation splits, UTF-8 stays whole") {
  CHECK(Tokenize("Hello, World! It's 3.5%") ==
        std::vector<std::string>{"hello", ",", "world", "!", "it", "'", "s", "3", ".", "5", "%"});
  CHECK(Tokenize("  Über\tdie Straße\r\n") == std::vector<std::string>{"Über", "die", "straße"});
  CHECK(Tokenize(" \t ").empty());
  CHECK(Tokenize("it’s") == std::vector<std::string>{"it’s"});  // U+2019 is not ASCII
}

TEST_CASE("examples corpus: vocabulary keeps the most frequent words, ties in byte order") {
  std::vector<std::vector<std::string>> s = {{"b", "a", "c"}, {"c", "b"}, {"c", "d"}};
  Vocabulary v = Vocabulary::Build(s, 2);
  REQUIRE(v.size() == 6);
  CHECK(v.word(kPadId) == "<pad>");
  CHECK(v.Lookup("c") == kFirstWordId);      // 3 times
  CHECK(v.Lookup("b") == kFirstWordId + 1);  // 2 times
  CHECK(v.Lookup("a") == kUnkId);            // cut by the cap
  CHECK(v.Lookup("zzz") == kUnkId);
}

TEST_CASE("examples corpus: pairs are truncated, empty sides skipped, bad lines named") {
  CorpusOptions opt;
  opt.max_len = 3;
  auto c = BuildCorpus({"One two three four five\tEins zwei\tsrc", "...\t", "Hi\tHallo", ""}, "mem",
                       opt);
  REQUIRE(c.ok());
  CHECK(c->lines == 3);
  CHECK(c->pairs.size() == 2);
  CHECK(c->skipped_empty == 1);
  CHECK(c->truncated == 1);
  CHECK(c->pairs[0].src.size() == 3);
  CHECK(c->pairs[0].tgt.size() == 2);
  CHECK(c->pairs[1].tgt == std::vector<int32_t>{c->tgt_vocab.Lookup("hallo")});

  auto bad = BuildCorpus({"ok\tgut", "no tab here"}, "mem", opt);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK(bad.status().message().find("mem:2: no TAB") != std::string::npos);
  CHECK_FALSE(BuildCorpus({"\t"}, "mem", opt).ok());
}

TEST_CASE("examples corpus: a bad path or a bad .xz is a clear error") {
  auto missing = LoadCorpus("/nonexistent/corpus.tsv", {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);
  CHECK(missing.status().message().find("/nonexistent/corpus.tsv") != std::string::npos);
  CHECK(missing.status().message().find("English<TAB>German") != std::string::npos);
  CHECK(LoadCorpus("/nonexistent/corpus.tsv.xz", {}).status().code() == ErrorCode::kNotFound);
  CHECK(LoadCorpus("/tmp", {}).status().code() == ErrorCode::kInvalidArgument);

  std::string not_xz = TempFile("plain text\tKlartext\n", ".tsv.xz");
  auto r = LoadCorpus(not_xz, {});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("xz -dc") != std::string::npos);
  std::remove(not_xz.c_str());
}

TEST_CASE("examples corpus: the real fillets corpus reads the same from .xz and from .tsv") {
  std::string xz = SEQPOINT_EXAMPLES_DATA_DIR "/ende_fillets.tsv.xz";
  auto a = LoadCorpus(xz, {});
  REQUIRE_MESSAGE(a.ok(), a.status().ToString());
  CHECK(a->lines == 1809);
  CHECK(a->pairs.size() + a->skipped_empty == 1809);
  CHECK(a->src_vocab.size() > 1000);

  std::string tsv = SEQPOINT_CORPORA_DIR "/ende_fillets.tsv";
  struct stat st {};
  if (stat(tsv.c_str(), &st) != 0) {
    MESSAGE("skipping the .tsv comparison: " << tsv << " is not built");
    return;
  }
  auto b = LoadCorpus(tsv, {});
  REQUIRE(b.ok());
  REQUIRE(b->pairs.size() == a->pairs.size());
  for (size_t i = 0; i < a->pairs.size(); ++i) {
    CHECK(a->pairs[i].src == b->pairs[i].src);
    CHECK(a->pairs[i].tgt == b->pairs[i].tgt);
  }
}
