#include "tests/support/test_models.h"

#include <cstdlib>
#include <filesystem>

namespace larder::testing {

std::optional<std::string> test_models_dir() {
  const char* env = std::getenv("LARDER_TEST_MODELS");
  std::string dir = (env && *env) ? env : LARDER_DEFAULT_TEST_MODELS;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::nullopt;
  return dir;
}

std::optional<std::string> test_model_path(const std::string& file_name) {
  auto dir = test_models_dir();
  if (!dir) return std::nullopt;
  std::string p = *dir + "/" + file_name;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return std::nullopt;
  return p;
}

}  // namespace larder::testing
