// The candidate file formats: what each reads, what it skips, and that every way a line can be
// wrong is an error naming the file and the line.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "candidate_file.h"
#include "support/seed.h"
#include "synthetic.h"

namespace cudanms::testing {
namespace {

using tools::CandidateFile;
using tools::CandidateSet;
using tools::FileFormat;

CandidateFile parse_ok(const std::string &text, FileFormat format) {
  CandidateFile file;
  const Status status = tools::parse_candidates(text, "in.txt", format, &file);
  EXPECT_TRUE(status.ok()) << status.message();
  return file;
}

void expect_same_candidates(const CandidateSet &got, const CandidateSet &want) {
  EXPECT_EQ(got.boxes, want.boxes);
  EXPECT_EQ(got.scores, want.scores);
  EXPECT_EQ(got.classes, want.classes);
}

TEST(OroFormat, ReadsIntegerSquareWindowsAsClassZeroBoxes) {
  const CandidateFile file = parse_ok("10,20,30,0.75\n-4,0,0,1e-3\n", FileFormat::kOro);
  CandidateSet want;
  want.add(10, 20, 40, 50, 0.75f);
  want.add(-4, 0, -4, 0, 1e-3f);
  expect_same_candidates(file.candidates, want);
  EXPECT_EQ(file.source_lines, (std::vector<std::string>{"10,20,30,0.75", "-4,0,0,1e-3"}));
  EXPECT_EQ(file.line_numbers, (std::vector<size_t>{1, 2}));
}

TEST(CsvFormat, ReadsCornersWithAnOptionalClass) {
  const CandidateFile file =
      parse_ok("1.5,2.25,3.5,4,0.5\n0,0,10,10,0.9,7\n5,5,5,6,0,-2\n", FileFormat::kCsv);
  CandidateSet want;
  want.add(1.5f, 2.25f, 3.5f, 4, 0.5f, 0);
  want.add(0, 0, 10, 10, 0.9f, 7);
  want.add(5, 5, 5, 6, 0, -2);
  expect_same_candidates(file.candidates, want);
}

TEST(BothFormats, SkipCommentsBlankLinesAndTrailingWhitespace) {
  const std::string text =
      "# x,y,w,score\n"
      "\n"
      "  \t\n"
      "1,2,3,0.5\r\n"
      "   # an indented comment\n"
      " 4 , 5,6 ,+0.25 \t\n"
      "7,8,9,0.125";  // no newline at the end
  const CandidateFile oro = parse_ok(text, FileFormat::kOro);
  EXPECT_EQ(oro.candidates.size(), 3u);
  EXPECT_EQ(oro.source_lines,
            (std::vector<std::string>{"1,2,3,0.5", " 4 , 5,6 ,+0.25", "7,8,9,0.125"}));
  EXPECT_EQ(oro.line_numbers, (std::vector<size_t>{4, 6, 7}));
  EXPECT_EQ(oro.candidates.scores[1], 0.25f);

  const CandidateFile csv =
      parse_ok("# x1,y1,x2,y2,score,class\r\n\r\n0,0,1,1,0.5,3\r\n", FileFormat::kCsv);
  EXPECT_EQ(csv.source_lines, (std::vector<std::string>{"0,0,1,1,0.5,3"}));
  EXPECT_EQ(csv.line_numbers, (std::vector<size_t>{3}));
}

TEST(BothFormats, EmptyTextHasNoCandidates) {
  for (FileFormat format : {FileFormat::kOro, FileFormat::kCsv}) {
    EXPECT_EQ(parse_ok("", format).candidates.size(), 0u);
    EXPECT_EQ(parse_ok("# nothing\n\n", format).candidates.size(), 0u);
  }
}

struct BadLine {
  FileFormat format;
  std::string line;
  std::string why;  // a part of the message
};

TEST(BothFormats, EveryKindOfBadLineNamesTheFileAndTheLine) {
  const std::vector<BadLine> bad = {
      {FileFormat::kOro, "1,2,3", "expected 4 fields"},
      {FileFormat::kOro, "1,2,3,0.5,0", "csv"},
      {FileFormat::kOro, "1,2,3,0.5,", "found 5"},
      {FileFormat::kOro, "1,,3,0.5", "'' is not an integer"},
      {FileFormat::kOro, "a,2,3,0.5", "x 'a' is not an integer"},
      {FileFormat::kOro, "1.5,2,3,0.5", "x '1.5' is not an integer"},
      {FileFormat::kOro, "1,2,3.0,0.5", "w '3.0' is not an integer"},
      {FileFormat::kOro, "1,2,-3,0.5", "w '-3' is negative"},
      {FileFormat::kOro, "1,2,3,high", "score 'high' is not a number"},
      {FileFormat::kOro, "1,2,3,nan", "is NaN"},
      {FileFormat::kOro, "1,2,3,-inf", "is infinite"},
      {FileFormat::kOro, "1,2,3,1e99", "out of the range"},
      {FileFormat::kOro, "99999999999999999999,2,3,0.5", "out of range"},
      {FileFormat::kOro, "16777215,0,2,0.5", "2^24"},
      {FileFormat::kOro, "100,50,9223372036854775807,0.5", "2^24"},  // x + w would overflow
      {FileFormat::kCsv, "0,0,1,1", "oro"},
      {FileFormat::kCsv, "0,0,1,1,0.5,1,2", "found 7"},
      {FileFormat::kCsv, "x1,y1,x2,y2,score", "x1 'x1' is not a number"},
      {FileFormat::kCsv, "0,0,1,1,0.5 0.6", "score '0.5 0.6' is not a number"},
      {FileFormat::kCsv, "NaN,0,1,1,0.5", "x1 'NaN' is NaN"},
      {FileFormat::kCsv, "0,0,inf,1,0.5", "x2 'inf' is infinite"},
      {FileFormat::kCsv, "5,0,4,1,0.5", "x2 < x1: the width is negative"},
      {FileFormat::kCsv, "0,5,1,4,0.5", "y2 < y1: the height is negative"},
      {FileFormat::kCsv, "0,0,1,1,0.5,1.0", "class '1.0' is not an integer"},
      {FileFormat::kCsv, "0,0,1,1,0.5,3000000000", "class '3000000000' is out of range"},
  };
  for (const BadLine &b : bad) {
    const std::string good = b.format == FileFormat::kOro ? "1,2,3,0.5" : "0,0,1,1,0.5";
    CandidateFile file;
    const Status status = tools::parse_candidates(
        "# header\n" + good + "\n\n" + b.line + "\n" + good, "in.txt", b.format, &file);
    ASSERT_FALSE(status.ok()) << b.line;
    EXPECT_EQ(status.message().rfind("in.txt:4: ", 0), 0u) << b.line << " -> " << status.message();
    EXPECT_NE(status.message().find(b.why), std::string::npos)
        << b.line << " -> " << status.message();
    EXPECT_EQ(file.candidates.size(), 0u) << "a rejected file yields nothing";
  }
}

TEST(CandidateFileNames, FormatFromExtension) {
  FileFormat format = FileFormat::kOro;
  EXPECT_TRUE(tools::file_format_from_extension("/tmp/a.csv", &format));
  EXPECT_EQ(format, FileFormat::kCsv);
  EXPECT_TRUE(tools::file_format_from_extension("b.oro", &format));
  EXPECT_EQ(format, FileFormat::kOro);
  for (const char *other : {"c.txt", "csv", "dir.csv/windows", "d.CSV2"}) {
    EXPECT_FALSE(tools::file_format_from_extension(other, &format)) << other;
  }
  EXPECT_TRUE(tools::parse_file_format("csv", &format));
  EXPECT_FALSE(tools::parse_file_format("json", &format));
}

TEST(ReadCandidateFile, ReadsAFileAndNamesItInErrors) {
  const std::string path = ::testing::TempDir() + "cudanms_candidate_file_" +
                           std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                           ".csv";
  std::ofstream(path) << "0,0,1,1,0.5\n0,0,1,-1,0.5\n";
  CandidateFile file;
  Status status = tools::read_candidate_file(path, FileFormat::kCsv, &file);
  EXPECT_EQ(status.message(), path + ":2: y2 < y1: the height is negative");
  std::ofstream(path) << "0,0,1,1,0.5\n";
  status = tools::read_candidate_file(path, FileFormat::kCsv, &file);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(file.candidates.size(), 1u);
  std::remove(path.c_str());

  status = tools::read_candidate_file(path, FileFormat::kCsv, &file);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message().rfind(path + ": cannot open", 0), 0u) << status.message();
  status = tools::read_candidate_file(::testing::TempDir(), FileFormat::kCsv, &file);
  EXPECT_FALSE(status.ok()) << "a directory is no candidate file";
  EXPECT_EQ(status.message().rfind(::testing::TempDir(), 0), 0u) << status.message();
}

TEST(FormatCandidates, WhatIsWrittenReadsBackToTheSameFloats) {
  const uint64_t seed = run_seed();
  const CandidateSet faces = tools::face_windows(500, seed);
  const CandidateSet windows = tools::sliding_window_candidates(500, seed, 7);
  struct Case {
    const CandidateSet &set;
    FileFormat format;
  };
  for (const Case &c : {Case{faces, FileFormat::kOro}, Case{faces, FileFormat::kCsv},
                        Case{windows, FileFormat::kCsv}}) {
    std::string text;
    const Status status = tools::format_candidates(c.set, c.format, &text);
    ASSERT_TRUE(status.ok()) << status.message();
    const CandidateFile file = parse_ok(text, c.format);
    expect_same_candidates(file.candidates, c.set);
  }
}

TEST(FormatCandidates, OroRefusesWhatItCannotHold) {
  for (const char *unfit : {"0,0,2,3,0.5", "0.5,0,2.5,2,0.5", "0,0,2,2,0.5,1"}) {
    const CandidateFile file = parse_ok(std::string("0,0,4,4,0.5\n") + unfit, FileFormat::kCsv);
    std::string text;
    const Status status = tools::format_candidates(file.candidates, FileFormat::kOro, &text);
    EXPECT_FALSE(status.ok()) << unfit;
    EXPECT_NE(status.message().find("candidate 1 "), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace cudanms::testing
