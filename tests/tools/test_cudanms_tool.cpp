// cudanms-tool as a user runs it: the built binary (CUDANMS_TOOL) in a child process, its
// output checked against the reference NMS of tests/kernels and its exit codes and messages
// against the usage text.
#include <glib.h>
#include <glib/gstdio.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "candidate_file.h"
#include "cudanms/nms.h"
#include "kernels/reference.h"
#include "support/file_size_limit.h"
#include "support/seed.h"
#include "support/test_scale.h"
#include "synthetic.h"
#include "tool_runner.h"

namespace cudanms::testing {
namespace {

using tools::CandidateFile;
using tools::CandidateSet;
using tools::FileFormat;

// `bench` with every family of rows turned off, then `options`: the rows a test asks for, and
// the rest (an option given twice takes its last value).
std::vector<std::string> bench_only(std::vector<std::string> options) {
  std::vector<std::string> args = {
      "bench", "--sizes",         "", "--class-sizes", "", "--diou-sizes",
      "",      "--variant-sizes", "", "--face-sizes",  "", "--batches",
      "",      "--streams",       "", "--group-sizes", ""};
  args.insert(args.end(), options.begin(), options.end());
  return args;
}

std::string describe(const Outcome &o) {
  return "exit " + std::to_string(o.exit_code) + ", stderr: " + o.err;
}

bool starts_with(const std::string &s, const std::string &prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Options as the tool spells them, and the same as Params for the reference.
struct NmsOptions {
  Method method = Method::kGreedy;
  Overlap overlap = Overlap::kIoU;
  float threshold = 0.5f;
  bool class_agnostic = false;
  size_t max_candidates = 4096;
  size_t max_detections = 0;

  std::vector<std::string> args() const {
    std::vector<std::string> a = {"--method",         to_string(method),
                                  "--overlap",        to_string(overlap),
                                  "--threshold",      std::to_string(threshold),
                                  "--max-candidates", std::to_string(max_candidates),
                                  "--max-detections", std::to_string(max_detections)};
    if (class_agnostic) a.push_back("--class-agnostic");
    return a;
  }
  Params params() const {
    Params p;
    p.method = method;
    p.overlap = overlap;
    p.threshold = threshold;
    p.class_agnostic = class_agnostic;
    p.max_candidates = max_candidates;
    p.max_detections = max_detections;
    return p;
  }
  std::string description() const {
    std::string d;
    for (const std::string &a : args()) d += a + " ";
    return d;
  }
};

class CudanmsTool : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(std::getenv("CUDANMS_TOOL"), nullptr)
        << "set CUDANMS_TOOL to the cudanms-tool to test, as meson test does";
    GError *error = nullptr;
    char *dir = g_dir_make_tmp("cudanms-tool-test-XXXXXX", &error);
    ASSERT_NE(dir, nullptr) << error->message;
    dir_ = dir;
    g_free(dir);
  }

  void TearDown() override {
    if (dir_.empty()) return;
    if (GDir *dir = g_dir_open(dir_.c_str(), 0, nullptr)) {
      while (const char *name = g_dir_read_name(dir)) g_remove((dir_ + "/" + name).c_str());
      g_dir_close(dir);
    }
    g_rmdir(dir_.c_str());
  }

  std::string path(const std::string &name) const { return dir_ + "/" + name; }

  std::string write(const std::string &name, const std::string &text) const {
    const std::string p = path(name);
    EXPECT_TRUE(g_file_set_contents(p.c_str(), text.c_str(), text.size(), nullptr));
    return p;
  }

  static std::string read(const std::string &p) {
    g_autofree char *text = nullptr;
    gsize size = 0;
    EXPECT_TRUE(g_file_get_contents(p.c_str(), &text, &size, nullptr)) << p;
    return text ? std::string(text, size) : std::string();
  }

  static bool exists(const std::string &p) { return g_file_test(p.c_str(), G_FILE_TEST_EXISTS); }

  // A candidate file in `format`, with comments, blank lines and CRLF endings strewn in, which
  // the tool must skip and trim.
  std::string write_candidates(const std::string &name, const CandidateSet &set,
                               FileFormat format) const {
    std::string lines;
    EXPECT_TRUE(tools::format_candidates(set, format, &lines).ok());
    std::string text = "# synthetic candidates\n\n";
    size_t line = 0;
    for (size_t start = 0, end; (end = lines.find('\n', start)) != std::string::npos;
         start = end + 1, ++line) {
      text += lines.substr(start, end - start) + (line % 7 == 3 ? " \r\n" : "\n");
      if (line % 11 == 5) text += "# a comment between detections\n\n";
    }
    return write(name, text);
  }

  // Runs the tool on `input` and checks its output: exactly the reference's kept candidates,
  // each line as written in the input, in input order. Returns the output file's path.
  std::string expect_reference_output(const std::string &input, FileFormat format,
                                      const NmsOptions &options) {
    CandidateFile file;
    const Status parsed = tools::read_candidate_file(input, format, &file);
    EXPECT_TRUE(parsed.ok()) << parsed.message();
    std::vector<uint32_t> kept = reference_nms(file.candidates, options.params()).kept;
    std::sort(kept.begin(), kept.end());
    std::string want;
    CandidateSet want_set;
    for (uint32_t i : kept) {
      want += file.source_lines[i] + "\n";
      const float *b = &file.candidates.boxes[4 * i];
      want_set.add(b[0], b[1], b[2], b[3], file.candidates.scores[i], file.candidates.classes[i]);
    }

    const std::string output = path("kept-" + std::to_string(outputs_++));
    std::vector<std::string> args = {
        "nms", "--input", input, "--format", tools::to_string(format), "--output", output};
    for (const std::string &a : options.args()) args.push_back(a);
    const Outcome o = run_tool(args);
    EXPECT_EQ(o.exit_code, 0) << describe(o);
    EXPECT_EQ(o.out, "") << "with --output, nothing goes to stdout";
    EXPECT_EQ(read(output), want) << options.description();

    CandidateFile reread;
    const Status status = tools::read_candidate_file(output, format, &reread);
    EXPECT_TRUE(status.ok()) << status.message();
    EXPECT_EQ(reread.candidates.boxes, want_set.boxes);
    EXPECT_EQ(reread.candidates.scores, want_set.scores);
    EXPECT_EQ(reread.candidates.classes, want_set.classes);
    return output;
  }

  // The CPU and CUDA backends write the same bytes for every method and overlap.
  void expect_backends_agree(const std::string &input, bool class_agnostic) {
    // The small test scale: IoU alone (each CUDA run starts a process under racecheck).
    const std::vector<Overlap> overlaps =
        small_test_scale() ? std::vector<Overlap>{Overlap::kIoU}
                           : std::vector<Overlap>{Overlap::kIoU, Overlap::kIoMin, Overlap::kIoS};
    for (Method method : {Method::kGreedy, Method::kMatrix, Method::kSoft, Method::kWeighted}) {
      for (Overlap overlap : overlaps) {
        NmsOptions options;
        options.method = method;
        options.overlap = overlap;
        options.class_agnostic = class_agnostic;
        std::vector<std::string> args = {"nms", "--input", input};
        for (const std::string &a : options.args()) args.push_back(a);
        args.insert(args.end(), {"--backend", "cpu"});
        const Outcome on_cpu = run_tool(args);
        args.back() = "cuda";
        const Outcome on_gpu = run_tool(args);
        ASSERT_EQ(on_cpu.exit_code, 0) << describe(on_cpu);
        ASSERT_EQ(on_gpu.exit_code, 0) << describe(on_gpu);
        EXPECT_FALSE(on_cpu.out.empty());
        EXPECT_EQ(on_gpu.out, on_cpu.out) << input << " " << options.description();
      }
    }
  }

  std::string dir_;
  int outputs_ = 0;
};

TEST_F(CudanmsTool, HelpListsTheSubcommands) {
  for (const char *help : {"--help", "-h", "help"}) {
    const Outcome o = run_tool({help});
    EXPECT_EQ(o.exit_code, 0) << describe(o);
    EXPECT_NE(o.out.find("nms "), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("generate "), std::string::npos) << o.out;
  }
  for (const char *subcommand : {"nms", "generate"}) {
    const Outcome o = run_tool({subcommand, "--help"});
    EXPECT_EQ(o.exit_code, 0) << describe(o);
    EXPECT_NE(o.out.find("--output"), std::string::npos) << o.out;
  }
  const Outcome bench = run_tool({"bench", "--help"});
  EXPECT_EQ(bench.exit_code, 0) << describe(bench);
  EXPECT_NE(bench.out.find("--json"), std::string::npos) << bench.out;
}

TEST_F(CudanmsTool, BadUsageExits2WithAMessage) {
  const std::string input = write("in.csv", "0,0,1,1,0.5\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "Usage"},
      {{"nmss"}, "unknown subcommand 'nmss'"},
      {{"nms"}, "--input"},
      {{"nms", "--input", input, "--method", "fancy"}, "unknown method 'fancy'"},
      {{"nms", "--input", input, "--overlap", "giou"}, "unknown overlap 'giou'"},
      {{"nms", "--input", input, "--backend", "tpu"}, "unknown backend 'tpu'"},
      {{"nms", "--input", input, "--format", "json"}, "unknown format 'json'"},
      {{"nms", "--input", input, "--threshold", "1.5"}, "threshold"},
      {{"nms", "--input", input, "--threshold", "half"}, "threshold"},
      {{"nms", "--input", input, "--max-candidates", "0"}, "--max-candidates"},
      {{"nms", "--input", input, "--max-detections", "-1"}, "--max-detections"},
      {{"nms", "--input", input, "--min-neighbors", "-1"}, "--min-neighbors"},
      {{"nms", "--input", input, "--method", "group", "--group-eps", "-0.5"}, "group eps"},
      {{"nms", "--input", input, "--no-such-option"}, "no-such-option"},
      {{"nms", "--input", input, "stray"}, "unexpected argument 'stray'"},
      {{"generate", "--count", "3"}, "--kind"},
      {{"generate", "--kind", "faces"}, "--count"},
      {{"generate", "--kind", "cars", "--count", "3"}, "unknown kind 'cars'"},
      {{"generate", "--kind", "faces", "--count", "3", "--classes", "4"}, "--classes"},
      {{"nms", "--input", input, "--repeat", "-1"}, "--repeat"},
      {{"bench", "--sizes", "300,x"}, "--sizes"},
      {{"bench", "--class-sizes", "300,"}, "--class-sizes"},
      {{"bench", "--face-sizes", "0"}, "--face-sizes"},
      {{"bench", "--shared-contexts", "0"}, "--shared-contexts"},
      {{"bench", "--variant-sizes", "", "--diou-sizes", "x"}, "--diou-sizes"},
      {{"bench", "--repeat", "0"}, "--repeat"},
      {{"bench", "--sets", "0"}, "--sets"},
      {{"bench", "--seed", "-3"}, "--seed"},
      {{"bench", "--backends", "cpu,tpu"}, "unknown backend 'tpu'"},
      {{"bench", "--input", input, "--format", "json"}, "unknown format 'json'"},
      {{"bench", "stray"}, "unexpected argument 'stray'"},
  };
  for (const auto &[args, message] : cases) {
    const Outcome o = run_tool(args);
    std::string command;
    for (const std::string &a : args) command += a + " ";
    EXPECT_EQ(o.exit_code, 2) << command << describe(o);
    EXPECT_EQ(o.out, "") << command;
    EXPECT_NE(o.err.find(message), std::string::npos) << command << describe(o);
  }
}

TEST_F(CudanmsTool, CsvKeepsTheReferenceSubsetAndGreedyOutputIsAFixedPoint) {
  const uint64_t seed = run_seed();
  const std::string input = write_candidates(
      "windows.csv", tools::sliding_window_candidates(3000, seed, 3), FileFormat::kCsv);
  std::vector<NmsOptions> runs(6);
  runs[1].class_agnostic = true;
  runs[2].threshold = 0.3f;
  runs[2].max_detections = 25;
  runs[3].method = Method::kMatrix;
  runs[4].method = Method::kMatrix;
  runs[4].overlap = Overlap::kIoMin;
  runs[5].overlap = Overlap::kIoS;
  runs[5].class_agnostic = true;
  for (const NmsOptions &options : runs) {
    const std::string output = expect_reference_output(input, FileFormat::kCsv, options);
    if (options.method == Method::kGreedy) {
      // Nothing greedy kept overlaps another kept one past the threshold.
      std::vector<std::string> again = {"nms", "--input", output, "--format", "csv"};
      for (const std::string &a : options.args()) again.push_back(a);
      const Outcome o = run_tool(again);
      EXPECT_EQ(o.exit_code, 0) << describe(o);
      EXPECT_EQ(o.out, read(output)) << options.description();
    }
  }
}

// soft and weighted print their own values, csv, in kept order: the reference's, to the bit.
TEST_F(CudanmsTool, SoftWeightedAndGroupPrintTheReferencesValues) {
  const CandidateSet set = tools::sliding_window_candidates(800, run_seed() + 3, 4);
  const std::string input = write_candidates("windows.csv", set, FileFormat::kCsv);
  for (const char *method : {"soft", "weighted", "group"}) {
    Params params;
    parse_method(method, &params.method);
    params.soft_decay = SoftDecay::kLinear;
    params.threshold = 0.4f;
    params.class_groups = {{0, 2}};
    params.min_neighbors = 2;
    params.group_eps = 0.3;
    const std::string output = path(std::string("kept-") + method + ".csv");
    const Outcome o = run_tool({"nms", "--input", input, "--method", method, "--soft-decay",
                                "linear", "--threshold", "0.4", "--class-groups", "0,2",
                                "--min-neighbors", "2", "--group-eps", "0.3", "--output", output});
    ASSERT_EQ(o.exit_code, 0) << describe(o);
    CandidateFile got;
    ASSERT_TRUE(tools::read_candidate_file(output, FileFormat::kCsv, &got).ok());
    const Result want = reference_nms(set, params);
    ASSERT_GT(want.kept.size(), 10u);
    EXPECT_EQ(got.candidates.boxes, want.kept_boxes) << method;
    EXPECT_EQ(got.candidates.scores, want.kept_scores) << method;
    EXPECT_EQ(got.candidates.classes, want.kept_class_ids) << method;
  }
}

TEST_F(CudanmsTool, OroKeepsTheReferenceSubsetAndGreedyOutputIsAFixedPoint) {
  const std::string input =
      write_candidates("faces.oro", tools::face_windows(2000, run_seed() + 1), FileFormat::kOro);
  std::vector<NmsOptions> runs(3);
  runs[1].method = Method::kMatrix;
  runs[1].overlap = Overlap::kIoS;
  runs[1].threshold = 0.6f;
  runs[2].overlap = Overlap::kIoMin;
  for (const NmsOptions &options : runs) {
    const std::string output = expect_reference_output(input, FileFormat::kOro, options);
    if (options.method == Method::kGreedy) {
      std::vector<std::string> again = {"nms", "--input", output};  // no extension: oro
      for (const std::string &a : options.args()) again.push_back(a);
      const Outcome o = run_tool(again);
      EXPECT_EQ(o.exit_code, 0) << describe(o);
      EXPECT_EQ(o.out, read(output)) << options.description();
    }
  }
}

TEST_F(CudanmsTool, DefaultsAreTheLibrarysAndTheFormatComesFromTheName) {
  const std::string csv = write_candidates(
      "w.csv", tools::sliding_window_candidates(500, run_seed() + 2, 2), FileFormat::kCsv);
  const Outcome o = run_tool({"nms", "--input", csv});
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  NmsOptions defaults;
  EXPECT_EQ(o.out, read(expect_reference_output(csv, FileFormat::kCsv, defaults)));

  const std::string as_txt = write("w.txt", read(csv));
  const Outcome guessed = run_tool({"nms", "--input", as_txt});
  EXPECT_EQ(guessed.exit_code, 2) << "a .txt file is read as oro";
  EXPECT_NE(guessed.err.find("csv"), std::string::npos) << guessed.err;
  EXPECT_EQ(run_tool({"nms", "--input", as_txt, "--format", "csv"}).out, o.out);
}

TEST_F(CudanmsTool, BadFilesExit2NamingTheLineAndWriteNothing) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"a.oro", "1,2,3,0.5\n# fine so far\n1,2,3\n"},   {"b.oro", "1,2,3,0.5\n\n1,2,-3,0.5\n"},
      {"c.oro", "1,2,3,0.5\n1,2,3,0.5\n1.5,2,3,0.5\n"}, {"d.oro", "1,2,3,0.5\n\n1,2,3,nan\n"},
      {"e.csv", "0,0,1,1,0.5\n\n0,0,1,1,inf,0\n"},      {"f.csv", "0,0,1,1,0.5\n\n2,0,1,1,0.5\n"},
      {"g.csv", "0,0,1,1,0.5\n\n0,0,1,1,0.5,two\n"},    {"h.csv", "x1,y1,x2,y2,score\r\n"},
  };
  for (const auto &[name, text] : bad) {
    const std::string input = write(name, text);
    const size_t line = name == "h.csv" ? 1 : 3;
    const std::string output = path(name + ".out");
    for (bool to_file : {true, false}) {
      std::vector<std::string> args = {"nms", "--input", input};
      if (to_file) args.insert(args.end(), {"--output", output});
      const Outcome o = run_tool(args);
      EXPECT_EQ(o.exit_code, 2) << name << ": " << describe(o);
      EXPECT_TRUE(starts_with(o.err, input + ":" + std::to_string(line) + ": ")) << o.err;
      EXPECT_EQ(o.out, "") << name;
      EXPECT_FALSE(exists(output)) << name;
    }
  }
}

TEST_F(CudanmsTool, UnreadableInputExits2NamingTheFile) {
  const std::string output = path("out.csv");
  for (const std::string &input : {path("missing.csv"), dir_}) {
    const Outcome o = run_tool({"nms", "--input", input, "--output", output});
    EXPECT_EQ(o.exit_code, 2) << input << ": " << describe(o);
    EXPECT_TRUE(starts_with(o.err, input + ": ")) << o.err;
    EXPECT_EQ(o.out, "");
    EXPECT_FALSE(exists(output));
  }
}

TEST_F(CudanmsTool, AnUnwritableOutputExits1) {
  const Outcome o = run_tool({"nms", "--input", write("in.csv", "0,0,1,1,0.5\n"), "--output",
                              path("no-such-dir/out.csv")});
  EXPECT_EQ(o.exit_code, 1) << describe(o);
  EXPECT_NE(o.err.find("no-such-dir/out.csv: cannot create"), std::string::npos) << o.err;
  EXPECT_EQ(o.out, "");
}

// Write errors (a full disk, a file size limit) are exit status 1 with the OS's reason, and no
// half-written output is left behind.
TEST_F(CudanmsTool, AnOutputThatCannotBeWrittenWhollyExits1AndIsRemoved) {
  const std::string input = write_candidates(
      "many.csv", tools::sliding_window_candidates(300, run_seed() + 4), FileFormat::kCsv);
  const std::string output = path("kept.csv");
  const Outcome o = run_tool({"nms", "--input", input, "--output", output}, nullptr, 256);
  EXPECT_EQ(o.exit_code, 1) << describe(o);
  EXPECT_NE(o.err.find("kept.csv: cannot write: File too large"), std::string::npos) << o.err;
  EXPECT_FALSE(g_file_test(output.c_str(), G_FILE_TEST_EXISTS));
}

TEST_F(CudanmsTool, ABenchJsonThatCannotBeWrittenExits1) {
  const Outcome o = run_tool(
      bench_only({"--sizes", "100", "--class-sizes", "100", "--face-sizes", "100", "--sets", "1",
                  "--max-seconds", "0.05", "--backends", "cpu", "--json", path("bench.json")}),
      "/dev/null", 256);
  EXPECT_EQ(o.exit_code, 1) << describe(o);
  EXPECT_NE(o.err.find("--json: "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("File too large"), std::string::npos) << o.err;
}

TEST_F(CudanmsTool, StdoutOnAFullDiskExits1) {
  struct stat st;
  if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode))
    GTEST_SKIP() << "/dev/full is not the full device here";
  const std::string input = write("in.csv", "0,0,10,10,0.5\n");
  for (const std::vector<std::string> &args :
       {std::vector<std::string>{"nms", "--input", input},
        std::vector<std::string>{"generate", "--kind", "faces", "--count", "20"}}) {
    const Outcome o = run_tool(args, "/dev/full");
    EXPECT_EQ(o.exit_code, 1) << args[0] << ": " << describe(o);
    EXPECT_NE(o.err.find("cannot write to stdout: No space left on device"), std::string::npos)
        << o.err;
  }
}

// The largest Dmax costs what the file brings (it once sized the workspace and aborted);
// past it is a usage error.
TEST_F(CudanmsTool, ExtremeMaxCandidates) {
  const std::string input = write_candidates(
      "many.csv", tools::sliding_window_candidates(300, run_seed() + 5), FileFormat::kCsv);
  const Outcome standard = run_tool({"nms", "--input", input});
  const Outcome largest = run_tool({"nms", "--input", input, "-D", "4294967295"});
  EXPECT_EQ(largest.exit_code, 0) << describe(largest);
  EXPECT_EQ(largest.out, standard.out);
  const Outcome past = run_tool({"nms", "--input", input, "-D", "4294967296"});
  EXPECT_EQ(past.exit_code, 2) << describe(past);
  EXPECT_NE(past.err.find("max_candidates must be at most 4294967295"), std::string::npos)
      << past.err;
}

TEST_F(CudanmsTool, AnEmptyFileKeepsNothing) {
  const Outcome o = run_tool({"nms", "--input", write("empty.csv", "# nothing\n"), "--verbose"});
  EXPECT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_EQ(o.out, "");
  EXPECT_NE(o.err.find("0 in,"), std::string::npos) << o.err;
}

TEST_F(CudanmsTool, CandidatesOverCapacityAreDroppedWithAWarning) {
  const std::string input = write_candidates(
      "many.csv", tools::sliding_window_candidates(300, run_seed() + 3), FileFormat::kCsv);
  NmsOptions options;
  options.max_candidates = 40;
  expect_reference_output(input, FileFormat::kCsv, options);
  const Outcome o = run_tool({"nms", "--input", input, "--max-candidates", "40"});
  EXPECT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_NE(o.err.find("warning"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("260 of 300"), std::string::npos) << o.err;
  EXPECT_EQ(run_tool({"nms", "--input", input}).err, "") << "no warning when all fit";
}

TEST_F(CudanmsTool, VerboseCountsGoToStderrOnly) {
  const std::string input = write("four.csv",
                                  "0,0,10,10,0.9\n"
                                  "1,1,11,11,0.8\n"      // suppressed by the first
                                  "50,50,60,60,0.1\n"    // below the score threshold
                                  "80,80,90,90,0.7\n");  // over capacity
  const std::vector<std::string> args = {"nms", "--input",          input, "--score-threshold",
                                         "0.5", "--max-candidates", "2"};
  const Outcome quiet = run_tool(args);
  std::vector<std::string> verbose_args = args;
  verbose_args.push_back("--verbose");
  const Outcome verbose = run_tool(verbose_args);
  EXPECT_EQ(verbose.exit_code, 0) << describe(verbose);
  EXPECT_EQ(verbose.out, quiet.out);
  EXPECT_EQ(verbose.out, "0,0,10,10,0.9\n");
  EXPECT_NE(verbose.err.find("4 in, 0 invalid, 1 below score, 1 over capacity, 1 kept"),
            std::string::npos)
      << verbose.err;
  EXPECT_NE(verbose.err.find("on cpu"), std::string::npos) << verbose.err;
}

TEST_F(CudanmsTool, GenerateWritesTheRequestedCount) {
  const uint64_t seed = run_seed() % 1000000;
  struct Case {
    std::string kind;
    std::string name;  // its extension picks the format
    FileFormat format;
    int classes;
  };
  for (const Case &c :
       {Case{"faces", "f.oro", FileFormat::kOro, 1}, Case{"faces", "f.csv", FileFormat::kCsv, 1},
        Case{"sliding-window", "w.csv", FileFormat::kCsv, 1},
        Case{"sliding-window", "w5.csv", FileFormat::kCsv, 5}}) {
    for (size_t count : {0u, 1u, 777u}) {
      const std::string output = path(std::to_string(count) + c.name);
      const std::vector<std::string> args = {"generate",
                                             "--kind",
                                             c.kind,
                                             "--count",
                                             std::to_string(count),
                                             "--seed",
                                             std::to_string(seed),
                                             "--classes",
                                             std::to_string(c.classes)};
      std::vector<std::string> to_file = args;
      to_file.insert(to_file.end(), {"--output", output});
      const Outcome o = run_tool(to_file);
      ASSERT_EQ(o.exit_code, 0) << describe(o);
      EXPECT_EQ(o.out, "");
      CandidateFile file;
      const Status status = tools::read_candidate_file(output, c.format, &file);
      ASSERT_TRUE(status.ok()) << status.message();
      EXPECT_EQ(file.candidates.size(), count) << c.name;
      for (int32_t class_id : file.candidates.classes) {
        EXPECT_TRUE(class_id >= 0 && class_id < c.classes) << class_id;
      }
      std::vector<std::string> as_text = args;
      as_text.insert(as_text.end(), {"--format", tools::to_string(c.format)});
      EXPECT_EQ(run_tool(as_text).out, read(output)) << "the same seed, the same candidates";
    }
  }
  // To stdout, each kind in the format that fits it.
  for (const auto &[kind, format] : std::vector<std::pair<std::string, FileFormat>>{
           {"faces", FileFormat::kOro}, {"sliding-window", FileFormat::kCsv}}) {
    const Outcome o = run_tool({"generate", "--kind", kind, "--count", "50"});
    EXPECT_EQ(o.exit_code, 0) << describe(o);
    CandidateFile file;
    const Status status = tools::parse_candidates(o.out, "stdout", format, &file);
    EXPECT_TRUE(status.ok()) << kind << ": " << status.message();
    EXPECT_EQ(file.candidates.size(), 50u) << kind;
  }
}

TEST_F(CudanmsTool, GenerateRefusesSlidingWindowsAsOro) {
  const std::string output = path("w.oro");
  const Outcome o =
      run_tool({"generate", "--kind", "sliding-window", "--count", "10", "--output", output});
  EXPECT_EQ(o.exit_code, 2) << describe(o);
  EXPECT_NE(o.err.find("oro"), std::string::npos) << o.err;
  EXPECT_FALSE(exists(output));
}

TEST_F(CudanmsTool, NmsRepeatPrintsPercentilesAndWritesTheOutputOnce) {
  const std::string input = write_candidates(
      "w.csv", tools::sliding_window_candidates(800, run_seed() + 4, 3), FileFormat::kCsv);
  const Outcome once = run_tool({"nms", "--input", input});
  const Outcome timed = run_tool({"nms", "--input", input, "--repeat", "5"});
  ASSERT_EQ(timed.exit_code, 0) << describe(timed);
  EXPECT_EQ(timed.out, once.out);
  EXPECT_EQ(once.err, "");
  EXPECT_TRUE(starts_with(timed.err, "p50_us=")) << timed.err;
  EXPECT_NE(timed.err.find(" p99_us="), std::string::npos) << timed.err;
  EXPECT_NE(timed.err.find("runs=5 on cpu"), std::string::npos) << timed.err;

  const std::string output = path("kept.csv");
  const Outcome to_file = run_tool({"nms", "--input", input, "--repeat", "3", "--output", output});
  EXPECT_EQ(to_file.exit_code, 0) << describe(to_file);
  EXPECT_EQ(to_file.out, "");
  EXPECT_EQ(read(output), once.out);
}

// One row of the bench's table: N, config, backend, p50, p99, GPU us, kept, agrees, [target].
struct BenchRow {
  size_t n = 0;
  std::string config, backend, p50, p99, gpu;
  size_t kept = 0;
  std::string agrees;
};

std::vector<BenchRow> bench_rows(const std::string &out) {
  std::vector<BenchRow> rows;
  std::istringstream lines(out);
  bool in_table = false;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first == "N") {
      in_table = true;
      continue;
    }
    if (!in_table || line.empty()) {
      in_table = in_table && !line.empty();
      continue;
    }
    BenchRow row;
    row.n = std::stoul(first);
    fields >> row.config >> row.backend >> row.p50 >> row.p99 >> row.gpu >> row.kept >> row.agrees;
    rows.push_back(row);
  }
  return rows;
}

size_t count_of(const std::string &text, const std::string &part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// The dense-duplicates rows: every backend's kept set checked, and the piles kept as one box
// each (identical boxes, 100 groups, one cluster).
TEST_F(CudanmsTool, BenchDenseRowsPileNearIdenticalBoxes) {
  const Outcome o =
      run_tool(bench_only({"--dense", "--sizes", "100", "--class-sizes", "100", "--face-sizes",
                           "100", "--sets", "1", "--repeat", "2", "--max-seconds", "0.05"}));
  ASSERT_EQ(o.exit_code, 0) << describe(o) << o.out;
  std::map<std::string, size_t> kept;
  size_t dense_rows = 0;
  for (const BenchRow &row : bench_rows(o.out)) {
    if (row.config.rfind("dense-", 0) != 0) continue;
    ++dense_rows;
    if (row.backend != "opencv") {
      EXPECT_EQ(row.agrees, "yes") << row.config << " " << row.backend;
    }
    kept[row.config] = row.kept;
  }
  EXPECT_GE(dense_rows, 4u) << o.out;
  EXPECT_EQ(kept["dense-identical"], 1u) << o.out;
  EXPECT_EQ(kept["dense-groups"], 100u) << o.out;
  EXPECT_EQ(kept["dense-cluster"], 1u) << o.out;
  EXPECT_GT(kept["dense-huge"], 0u) << o.out;
}

// Streams rows: every thread's every frame checked, per-frame latency and frames/s in all; on
// CUDA also through one shared context and through two.
TEST_F(CudanmsTool, BenchStreamsRowsCheckEveryThreadsFrames) {
  const std::string json = path("bench.json");
  const Outcome o =
      run_tool(bench_only({"--batch-sizes", "200", "--streams", "1,3", "--repeat", "5", "--sets",
                           "2", "--json", json, "--shared-contexts", "1,2"}));
  ASSERT_EQ(o.exit_code, 0) << describe(o) << o.out;
  const bool with_cuda = o.out.find("\nGPU: cuda:") != std::string::npos;
  std::map<std::string, std::vector<std::string>> backends;
  for (const BenchRow &row : bench_rows(o.out)) {
    backends[row.config].push_back(row.backend);
    EXPECT_EQ(row.agrees, "yes") << row.config << " " << row.backend;
    EXPECT_NE(row.p50, "-");
    EXPECT_EQ(row.n, 200u);
  }
  const std::vector<std::string> want =
      with_cuda ? std::vector<std::string>{"cpu", "cuda", "cuda-shared", "cuda-shared-2"}
                : std::vector<std::string>{"cpu"};
  EXPECT_EQ(backends["streams-1"], want) << o.out;
  EXPECT_EQ(backends["streams-3"], want) << o.out;
  EXPECT_EQ(count_of(o.out, "frames/s in all"), 2 * want.size()) << o.out;
  const std::string text = read(json);
  EXPECT_EQ(count_of(text, "\"frames_per_second\": "), 2 * want.size()) << text;
  EXPECT_EQ(count_of(text, "\"streams\": 3"), want.size()) << text;
}

TEST_F(CudanmsTool, BenchChecksEveryRowAndDumpsWhatItChecked) {
  const std::string seed = std::to_string(run_seed() % 1000000);
  const std::string json = path("bench.json");
  const std::vector<std::string> args = {
      "bench",    "--variant-sizes", "300", "--diou-sizes", "500", "--sizes",
      "300,1000", "--class-sizes",   "600", "--classes",    "5",   "--face-sizes",
      "400",      "--group-sizes",   "",    "--batches",    "",    "--streams",
      "",         "--repeat",        "3",   "--sets",       "2",   "--seed",
      seed,       "--json",          json,  "--dump",       dir_};
  const Outcome o = run_tool(args);
  ASSERT_EQ(o.exit_code, 0) << describe(o) << o.out;
  EXPECT_NE(o.out.find("seed " + seed + " "), std::string::npos) << o.out;
  const bool with_opencv = o.out.find("\nOpenCV: 4.") != std::string::npos ||
                           o.out.find("\nOpenCV: 5.") != std::string::npos;

  // Every configuration has a CPU row that agreed with the reference run; greedy rows have an
  // OpenCV row when it is built in.
  const std::vector<BenchRow> rows = bench_rows(o.out);
  std::map<std::pair<std::string, size_t>, std::vector<std::string>> backends;
  for (const BenchRow &row : rows) {
    backends[{row.config, row.n}].push_back(row.backend);
    if (row.backend != "opencv") {
      EXPECT_EQ(row.agrees, "yes") << row.config << " " << row.n;
    }
    EXPECT_NE(row.p50, "-");
  }
  for (const auto &[config, n] :
       std::vector<std::pair<std::string, size_t>>{{"greedy", 300},
                                                   {"greedy", 1000},
                                                   {"greedy-5cls", 600},
                                                   {"greedy-diou", 500},
                                                   {"soft-gaussian", 300},
                                                   {"weighted", 300},
                                                   {"greedy-groups", 300},
                                                   {"matrix-faces", 400}}) {
    const std::vector<std::string> &b = backends[{config, n}];
    EXPECT_NE(std::find(b.begin(), b.end(), "cpu"), b.end()) << config << " " << n << o.out;
    const bool opencv = std::find(b.begin(), b.end(), "opencv") != b.end();
    EXPECT_EQ(opencv, with_opencv && (config.rfind("greedy", 0) == 0 && config != "greedy-diou" &&
                                      config != "greedy-groups"))
        << config << " " << n << o.out;
  }

  // The dumped data sets, and the kept indices the peers are checked against, are those of the
  // independent reference.
  struct Dumped {
    std::string config;
    size_t n;
    Params params;
  };
  std::vector<Dumped> dumped(5);
  dumped[0] = {"greedy", 300, {}};
  dumped[1] = {"greedy", 1000, {}};
  dumped[2] = {"greedy-5cls", 600, {}};
  dumped[3] = {"matrix-faces", 400, {}};
  dumped[0].params.class_agnostic = dumped[1].params.class_agnostic = true;
  dumped[3].params.method = Method::kMatrix;
  dumped[3].params.overlap = Overlap::kIoS;
  dumped[3].params.threshold = 0.3f;
  dumped[3].params.class_agnostic = true;
  dumped[4] = {"greedy-diou", 500, {}};
  dumped[4].params.overlap = Overlap::kDIoU;
  dumped[4].params.class_agnostic = true;
  std::map<std::string, std::string> texts;
  for (Dumped &d : dumped) {
    d.params.max_candidates = d.n;
    for (int set = 0; set < 2; ++set) {
      const std::string stem =
          path(d.config + "-n" + std::to_string(d.n) + "-set" + std::to_string(set));
      CandidateFile file;
      const Status status = tools::read_candidate_file(stem + ".csv", FileFormat::kCsv, &file);
      ASSERT_TRUE(status.ok()) << status.message();
      EXPECT_EQ(file.candidates.size(), d.n) << stem;
      std::string want;
      for (uint32_t i : reference_nms(file.candidates, d.params).kept) {
        want += std::to_string(i) + "\n";
      }
      EXPECT_EQ(read(stem + ".kept"), want) << stem;
      texts[stem] = read(stem + ".csv");
    }
  }

  const std::string text = read(json);
  EXPECT_NE(text.find("\"seed\": " + seed + ","), std::string::npos) << text;
  EXPECT_EQ(count_of(text, "\"backend\": \"cpu\""), 8u)
      << text;  // the five above and the three variants
  EXPECT_EQ(count_of(text, "\"kept_file\": "), 16u) << text;
  EXPECT_EQ(count_of(text, "\"differing\": 0"), rows.size()) << text;

  // The seed replays the data.
  std::vector<std::string> again = args;
  again.insert(again.end(), {"--backends", "cpu"});
  ASSERT_EQ(run_tool(again).exit_code, 0);
  for (const auto &[stem, csv] : texts) EXPECT_EQ(read(stem + ".csv"), csv) << stem;
}

TEST_F(CudanmsTool, BenchTimesCandidateFiles) {
  const std::string faces =
      write_candidates("faces.oro", tools::face_windows(500, run_seed() + 5), FileFormat::kOro);
  const std::string windows = write_candidates(
      "w.csv", tools::sliding_window_candidates(700, run_seed() + 6, 3), FileFormat::kCsv);
  const Outcome o = run_tool(
      bench_only({"--input", faces, "--input", windows, "--repeat", "2", "--backends", "cpu"}));
  ASSERT_EQ(o.exit_code, 0) << describe(o) << o.out;
  std::vector<std::string> configs;
  for (const BenchRow &row : bench_rows(o.out)) {
    configs.push_back(row.config);
    EXPECT_EQ(row.agrees, "yes") << row.config;
    EXPECT_EQ(row.n, row.config[0] == 'f' ? 500u : 700u) << row.config;
  }
  EXPECT_EQ(configs,
            (std::vector<std::string>{"faces.oro:greedy", "faces.oro:group", "faces.oro:matrix",
                                      "w.csv:greedy", "w.csv:group", "w.csv:greedy-per-class"}))
      << o.out;

  const Outcome bad = run_tool({"bench", "--input", write("bad.csv", "1,2,3\n")});
  EXPECT_EQ(bad.exit_code, 2) << describe(bad);
  EXPECT_NE(bad.err.find("bad.csv:1: "), std::string::npos) << bad.err;
}

// Batch rows: B frames per call, every frame of every call checked against the CPU backend's
// result for it alone; the JSON says how many frames a call took, and lists no data set of
// theirs to dump.
TEST_F(CudanmsTool, BenchBatchRowsCheckEveryFrame) {
  const std::string json = path("bench.json");
  const Outcome o =
      run_tool(bench_only({"--batches", "1,4", "--batch-sizes", "80,200", "--repeat", "3", "--sets",
                           "2", "--max-seconds", "0.05", "--json", json, "--dump", dir_}));
  ASSERT_EQ(o.exit_code, 0) << describe(o) << o.out;
  std::map<std::string, size_t> rows;
  for (const BenchRow &row : bench_rows(o.out)) {
    if (row.backend == "opencv") continue;
    EXPECT_EQ(row.agrees, "yes") << row.config << " " << row.n << " " << row.backend;
    ++rows[row.config + "/" + std::to_string(row.n)];
  }
  for (const char *row : {"batch-1/80", "batch-4/80", "batch-1/200", "batch-4/200"}) {
    EXPECT_GE(rows[row], 1u) << row << "\n" << o.out;
  }
  const std::string text = read(json);
  EXPECT_NE(text.find("\"frames_per_call\": 4"), std::string::npos) << text;
  EXPECT_EQ(text.find("batch-4-n80-set"), std::string::npos) << text;
}

TEST_F(CudanmsTool, WithoutADeviceTheBenchTimesTheCpuAlone) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  const Outcome o =
      run_tool(bench_only({"--sizes", "300", "--repeat", "2", "--backends", "cpu,cuda"}));
  ASSERT_EQ(o.exit_code, 0) << describe(o);
  EXPECT_NE(o.out.find("GPU: no CUDA device"), std::string::npos) << o.out;
  const std::vector<BenchRow> rows = bench_rows(o.out);
  ASSERT_EQ(rows.size(), 1u) << o.out;
  EXPECT_EQ(rows[0].backend, "cpu");
}

TEST_F(CudanmsTool, CudaBenchAgreesWithTheCpuBackend) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const std::string json = path("bench.json");
  const Outcome o =
      run_tool(bench_only({"--sizes",       small_test_scale() ? "300,1500" : "300,3000",
                           "--class-sizes", small_test_scale() ? "1500" : "2000",
                           "--face-sizes",  "1000",
                           "--group-sizes", "1000",
                           "--batches",     "1,8",
                           "--batch-sizes", "500",
                           "--repeat",      "5",
                           "--backends",    "cpu,cuda",
                           "--seed",        std::to_string(run_seed() % 1000000),
                           "--json",        json}));
  ASSERT_EQ(o.exit_code, 0) << describe(o) << o.out;
  size_t cuda_rows = 0;
  for (const BenchRow &row : bench_rows(o.out)) {
    EXPECT_EQ(row.agrees, "yes") << row.config << " " << row.n << " " << row.backend;
    if (row.backend != "cuda") continue;
    ++cuda_rows;
    EXPECT_NE(row.gpu, "-") << "the GPU-only time of " << row.config << " " << row.n;
  }
  EXPECT_EQ(cuda_rows, 7u) << o.out;  // five single-frame rows, two batch rows
  const std::string text = read(json);
  EXPECT_EQ(count_of(text, "\"device\": {"), 7u) << text;
  EXPECT_NE(text.find("\"gpu\": \"cuda:"), std::string::npos) << text;
}

TEST_F(CudanmsTool, CudaBackendWritesTheSameBytesAsCpu) {
  std::string why;
  if (!cuda_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const uint64_t seed = run_seed() % 1000000;
  const std::string windows = path("windows.csv");
  const std::string faces = path("faces.oro");
  for (const auto &[kind, output, classes] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"sliding-window", windows, "6"}, {"faces", faces, "1"}}) {
    const Outcome o =
        run_tool({"generate", "--kind", kind, "--count", small_test_scale() ? "600" : "4000",
                  "--seed", std::to_string(seed), "--classes", classes, "--output", output});
    ASSERT_EQ(o.exit_code, 0) << describe(o);
  }
  expect_backends_agree(windows, false);
  expect_backends_agree(windows, true);
  expect_backends_agree(faces, false);
}

TEST_F(CudanmsTool, WithoutADeviceTheCudaBackendFailsAndWritesNothing) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  const std::string output = path("out.csv");
  const Outcome o = run_tool({"nms", "--input", write("in.csv", "0,0,1,1,0.5\n"), "--backend",
                              "cuda", "--output", output});
  EXPECT_EQ(o.exit_code, 1) << describe(o);
  EXPECT_NE(o.err.find("cuda"), std::string::npos) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_FALSE(exists(output));
}

}  // namespace
}  // namespace cudanms::testing
