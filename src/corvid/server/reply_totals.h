// What every API's reply keeps of how its request ended: the finishing engine event's
// reason and token counts (usage blocks and finish/stop reasons are built from these).
#pragma once

#include <cstdint>

#include "corvid/engine/request.h"

namespace corvid::server {

struct ReplyTotals {
  bool finished = false;
  FinishReason finish = FinishReason::Error;
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;

  // Takes the event's totals when it is the finishing one (then returns true).
  bool note(const RequestEvent& event) {
    if (!event.finish) return false;
    finished = true;
    finish = *event.finish;
    prompt_tokens = event.prompt_tokens;
    completion_tokens = event.completion_tokens;
    cached_tokens = event.cached_tokens;
    return true;
  }
};

}  // namespace corvid::server
