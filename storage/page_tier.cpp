#include "storage/page_tier.h"

namespace larder {

const char* evict_reason_name(EvictReason r) {
  switch (r) {
    case EvictReason::kBudget: return "budget";
    case EvictReason::kTtl: return "ttl";
    case EvictReason::kAdmin: return "admin";
    case EvictReason::kCorrupt: return "corrupt";
    case EvictReason::kCount: break;
  }
  return "unknown";
}

}  // namespace larder
