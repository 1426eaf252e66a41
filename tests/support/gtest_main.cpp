// The suites' main: GoogleTest's, except that a binary whose every test skipped (a CUDA suite
// on a machine without a GPU) exits 77, so that `meson test` reports it as SKIP, not OK.
#include <gtest/gtest.h>

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  const ::testing::UnitTest &unit = *::testing::UnitTest::GetInstance();
  if (failed == 0 && unit.test_to_run_count() > 0 &&
      unit.skipped_test_count() == unit.test_to_run_count()) {
    return 77;
  }
  return failed;
}
