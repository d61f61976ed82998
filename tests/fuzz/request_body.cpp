#include <cmath>
#include <string>

#include "api/openai_request.h"
#include "api/reasoning.h"
#include "api/tool_calls.h"
#include "tests/fuzz/harness.h"

namespace larder::fuzz {

namespace {

// What a successful parse promises the engine (api/openai_request.h).
void check_options(const GenerationOptions& o) {
  const SamplingParams& s = o.sampling;
  LARDER_FUZZ_ASSERT(s.temperature >= 0.0f && s.temperature <= 2.0f);
  LARDER_FUZZ_ASSERT(s.top_p > 0.0f && s.top_p <= 1.0f);
  LARDER_FUZZ_ASSERT(s.min_p >= 0.0f && s.min_p <= 1.0f);
  LARDER_FUZZ_ASSERT(s.repeat_penalty > 0.0f && std::isfinite(s.repeat_penalty));
  LARDER_FUZZ_ASSERT(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f);
  LARDER_FUZZ_ASSERT(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f);
  LARDER_FUZZ_ASSERT(s.top_k >= 0 && s.repeat_last_n >= -1);
  LARDER_FUZZ_ASSERT(!o.max_tokens || *o.max_tokens >= 1);
  LARDER_FUZZ_ASSERT(o.stop.size() <= 4);
}

}  // namespace

int request_body(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const SamplingParams defaults;
  switch (data[0] % 3) {
    case 0: {
      ChatCompletionRequest out;
      if (!parse_chat_completion_request(body, defaults, &out)) {
        check_options(out.options);
        LARDER_FUZZ_ASSERT(!out.chat.messages.empty());
        for (const ChatMessage& m : out.chat.messages) {
          LARDER_FUZZ_ASSERT(m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool");
        }
      }
      break;
    }
    case 1: {
      CompletionRequest out;
      if (!parse_completion_request(body, defaults, 512, &out)) {
        check_options(out.options);
        for (int32_t id : out.prompt_tokens) LARDER_FUZZ_ASSERT(id >= 0 && id < 512);
      }
      break;
    }
    default: {
      // Model output with tool calls, whole and streamed in 7-byte deltas.
      static const ToolCallSyntax kSyntaxes[] = {ToolCallSyntax::kHermes, ToolCallSyntax::kLlama3Json,
                                                 ToolCallSyntax::kMistral, ToolCallSyntax::kGeneric,
                                                 ToolCallSyntax::kJsonEnvelope};
      ToolCallOptions options;
      options.syntax = kSyntaxes[(data[0] / 3) % 5];
      options.tool_names = {"get_weather", "f"};
      (void)parse_tool_calls(options, body);
      ToolCallStream stream(options);
      for (size_t i = 0; i < body.size(); i += 7) (void)stream.push(std::string(body.substr(i, 7)));
      (void)stream.finish();
      // Reasoning split off the same text: streamed in 7-byte deltas it is
      // the same as whole.
      const ReasoningOptions ro{ReasoningSyntax::kThinkTags, ReasoningFormat::kDeepseek, (data[0] & 1) != 0};
      const ReasoningSplit whole = split_reasoning(ro, body);
      ReasoningStream rs(ro);
      ReasoningSplit streamed;
      for (size_t i = 0; i < body.size(); i += 7) {
        ReasoningSplit p = rs.push(body.substr(i, 7), 1);
        streamed.reasoning += p.reasoning;
        streamed.content += p.content;
      }
      ReasoningSplit rest = rs.finish();
      LARDER_FUZZ_ASSERT(streamed.reasoning + rest.reasoning == whole.reasoning);
      LARDER_FUZZ_ASSERT(streamed.content + rest.content == whole.content);
      break;
    }
  }
  return 0;
}

}  // namespace larder::fuzz
