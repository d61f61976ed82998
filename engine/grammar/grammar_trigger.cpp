#include "engine/grammar/grammar_trigger.h"

#include <algorithm>

namespace larder {

namespace {

constexpr std::string_view kSpace = " \t\n\r";

// Keeps the last `keep` bytes of *s (those may begin a tag or trigger).
void keep_tail(std::string* s, size_t keep) {
  if (s->size() > keep) s->erase(0, s->size() - keep);
}

}  // namespace

TriggerWatch::TriggerWatch(const GrammarTriggers* triggers) : triggers_(triggers) {
  if (!triggers_ || triggers_->empty()) {
    state_ = State::kOff;
    return;
  }
  for (const GrammarTrigger& t : triggers_->triggers) {
    if (!t.at_start) longest_ = std::max(longest_, t.text.size());
  }
  if (triggers_->block_open.empty() || triggers_->block_close.empty()) {
    state_ = State::kContentStart;
  } else {
    state_ = triggers_->starts_in_block ? State::kInBlock : State::kBlockStart;
  }
}

std::optional<std::string> TriggerWatch::push(std::string_view piece) {
  if (state_ == State::kOff || state_ == State::kFired) return std::nullopt;
  held_ += piece;
  return scan();
}

std::optional<std::string> TriggerWatch::scan() {
  const GrammarTriggers& g = *triggers_;
  auto fire = [this](size_t at, const GrammarTrigger& t) {
    std::string out = held_.substr(std::min(held_.size(), at + (t.grammar_after ? t.text.size() : 0)));
    held_.clear();
    state_ = State::kFired;
    return out;
  };
  for (;;) {
    switch (state_) {
      case State::kBlockStart: {
        const size_t first = held_.find_first_not_of(kSpace);
        if (first == std::string::npos) return std::nullopt;
        const std::string_view t = std::string_view(held_).substr(first);
        if (t.starts_with(g.block_open)) {
          held_.erase(0, first + g.block_open.size());
          state_ = State::kInBlock;
        } else if (std::string_view(g.block_open).starts_with(t)) {
          return std::nullopt;  // may still be the opening tag
        } else {
          state_ = State::kContentStart;
        }
        break;
      }
      case State::kInBlock: {
        const size_t close = held_.find(g.block_close);
        if (close == std::string::npos) {
          keep_tail(&held_, g.block_close.size() - 1);
          return std::nullopt;
        }
        held_.erase(0, close + g.block_close.size());
        state_ = State::kContentStart;
        break;
      }
      case State::kContentStart: {
        const size_t first = held_.find_first_not_of(kSpace);
        if (first == std::string::npos) return std::nullopt;
        const std::string_view t = std::string_view(held_).substr(first);
        bool may_be_one = false;
        for (const GrammarTrigger& trig : g.triggers) {
          if (!trig.at_start) continue;
          if (t.starts_with(trig.text)) return fire(first, trig);
          if (std::string_view(trig.text).starts_with(t)) may_be_one = true;
        }
        if (may_be_one) return std::nullopt;
        state_ = State::kContent;
        break;
      }
      case State::kContent: {
        // The earliest trigger wins (of two at one place, the first listed).
        size_t best = std::string::npos;
        const GrammarTrigger* found = nullptr;
        for (const GrammarTrigger& trig : g.triggers) {
          if (trig.at_start || trig.text.empty()) continue;
          const size_t at = held_.find(trig.text);
          if (at < best) {
            best = at;
            found = &trig;
          }
        }
        if (found) return fire(best, *found);
        keep_tail(&held_, longest_ > 0 ? longest_ - 1 : 0);
        return std::nullopt;
      }
      case State::kOff:
      case State::kFired:
        return std::nullopt;
    }
  }
}

}  // namespace larder
