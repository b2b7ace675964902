// A test fixture with a private folder for the files a test writes (scenario
// files, traces), removed after the test.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace wafersim::test_support {

class ScratchFolder : public ::testing::Test {
 protected:
  // The folder is <temp>/<prefix><test name>-<pid>.
  explicit ScratchFolder(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + info->name() + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `text` to `name` inside the folder (making its subfolders).
  std::filesystem::path write(const std::string& name, const std::string& text) {
    const std::filesystem::path p = dir_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }

  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace wafersim::test_support
