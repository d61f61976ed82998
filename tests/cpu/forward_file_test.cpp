// The model file changing under a running forward pass: found by the hostile
// pass of the draft model (2026-12-05), a GGUF file truncated in place while
// the daemon served (cp over it, truncate) killed it with SIGBUS, since the
// forward pass read embedding rows and unpacked tensors through the file
// mapping. Now every tensor that is not repacked is copied at load, and a
// large embedding is read by rows with pread: a truncated file leaves the
// copied weights computing the same bits, and a row read past the new end
// is an error of the forward call, not a signal.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/cpu/matmul_packed.h"
#include "tests/cpu/forward_harness.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_models.h"

using namespace larder;
using namespace larder::testing;

TEST_CASE("a model file truncated after load: copies compute the same bits, row reads fail cleanly",
          "[cpu][forward]") {
  for (const char* file : {"stories260K.gguf", "stories260K-q8_0.gguf", "stories260K-f16.gguf"}) {
    LARDER_REQUIRE_MODEL(model, file);
    INFO(file);
    TempDir dir;
    const std::string copy = dir.str() + "/model.gguf";
    std::filesystem::copy_file(model, copy);
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 300, 31, 7};
    // The reference: the original file, untouched, embedding copied.
    ForwardHarness ref(model, KvDtype::kF32, 1);
    const std::vector<float> want = ref.prefill(ref.new_seq(16), prompt);

    ForwardHarness copied(copy, KvDtype::kF32, 1);              // embedding copied (small)
    ForwardHarness by_rows(copy, KvDtype::kF32, 1, 256, 0);    // embedding read by rows
    CHECK_FALSE(copied.fwd->reads_embedding_rows());
    CHECK(copied.prefill(copied.new_seq(16), prompt) == want);
    CHECK(by_rows.prefill(by_rows.new_seq(16), prompt) == want);

    // Found in hostile testing: a file of the same size or larger copied over
    // it was read for the embedding's rows: other weights' rows, wrong
    // answers with a 200, and their K/V pages cached. Written over in place
    // with its own bytes (same size, a later modification time): refused.
    // Then truncated.
    const uintmax_t full = std::filesystem::file_size(copy);
    for (uintmax_t size : {full, uintmax_t(4096), uintmax_t(0)}) {
      INFO((size == full ? "written over in place" : "truncated to " + std::to_string(size) + " bytes"));
      if (size == full) {
        const auto when = std::filesystem::last_write_time(copy);
        std::ifstream in(model, std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::ofstream(copy, std::ios::binary | std::ios::in | std::ios::out)
            .write(bytes.data(), std::streamsize(bytes.size()));
        std::filesystem::last_write_time(copy, when + std::chrono::seconds(1));
      } else {
        std::filesystem::resize_file(copy, size);
      }
      // Nothing of `copied` reads the file any more: the same logits.
      CHECK(copied.prefill(copied.new_seq(16), prompt) == want);
      if (!by_rows.fwd->reads_embedding_rows()) {
        // stories260K's output matrix is its embedding (tied); where it is
        // not repacked (F32, or a build with no packed kernel for its type)
        // it was copied whole, and the embedding shares the copy.
        CHECK_FALSE(packed_type_supported(by_rows.model->output().type));
        CHECK(by_rows.prefill(by_rows.new_seq(16), prompt) == want);
        continue;
      }
      // The row reads find the file shorter: an error naming it.
      std::vector<BatchToken> batch = {{prompt[0], 0, int32_t(by_rows.new_seq(16)), true}};
      std::vector<float> logits(size_t(by_rows.n_vocab()));
      const auto tables = by_rows.tables();
      const Status st = by_rows.fwd->forward(batch, tables, false, logits.data());
      REQUIRE_FALSE(st.is_ok());
      CHECK(st.code() == StatusCode::kIOError);
      CHECK_THAT(st.message(), Catch::Contains(copy + " changed on disk after it was loaded") &&
                                   Catch::Contains("restart larderd"));
    }
  }
}
