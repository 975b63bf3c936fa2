// Data path of the verbs provider: one provider call per post and per poll.
// Work requests and completions are the caller's own rdma-core structs.
#include <errno.h>

#include "smart/transport/verbs/verbs_transport.h"

namespace smart::verbs {

int VerbsQueuePair::post_send(ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  // Providers return an errno value, some of them negated (rxe).
  const int rc = ibv_post_send(qp_, wr, bad_wr);
  return __builtin_expect(rc == 0, 1) ? 0 : (rc < 0 ? -rc : rc);
}

int VerbsCompletionQueue::poll(int max_entries, ibv_wc* wc) {
  const int n = ibv_poll_cq(cq_, max_entries, wc);
  return __builtin_expect(n >= 0, 1) ? n : (n == -1 ? -EIO : n);
}

}  // namespace smart::verbs
