#include "tests/support/skip.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace larder::testing {
namespace {

std::mutex g_mu;
std::set<std::pair<std::string, std::string>>& skipped() {  // (test case, reason)
  static std::set<std::pair<std::string, std::string>> s;
  return s;
}

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::string(v) == value;
}

}  // namespace

void note_skip(const std::string& reason) {
  const std::string name = Catch::getResultCapture().getCurrentTestName();
  std::lock_guard<std::mutex> lock(g_mu);
  if (!skipped().emplace(name, reason).second) return;
  if (const char* log = std::getenv("LARDER_SKIP_LOG"); log && *log) {
    std::ofstream out(log, std::ios::app);
    out << name << "\t" << reason << "\n";
  }
}

std::string skip_summary() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (skipped().empty()) return "";
  std::map<std::string, std::set<std::string>> by_reason;
  for (const auto& [name, reason] : skipped()) by_reason[reason].insert(name);
  std::set<std::string> cases;
  for (const auto& [name, reason] : skipped()) cases.insert(name);
  std::string out = std::to_string(cases.size()) + " test case(s) skipped:\n";
  for (const auto& [reason, names] : by_reason) {
    out += "  " + std::to_string(names.size()) + ": " + reason + "\n";
  }
  return out;
}

bool model_skips_allowed() {
  if (env_is("CI", "true")) return false;
  const char* dir = std::getenv("LARDER_TEST_MODELS");
  const bool explicit_dir = dir && *dir && !env_is("LARDER_TEST_MODELS_DEFAULTED", "1");
  return !explicit_dir;
}

}  // namespace larder::testing
