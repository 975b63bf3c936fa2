// The client's side of the connection handshake (smart/resource/handshake.h):
// it proves the key first, checks the pool it reached (a pinned pool ID)
// and the blade's proof, and only then uses what the blade answered.
#include <chrono>
#include <mutex>

#include "smart/initiator/initiator_impl.h"
#include "smart/resource/handshake.h"
#include "smart/resource/net.h"
#include "smart/util/peer_text.h"

namespace smart {

void Initiator::Impl::handshake(Connection* conn, const std::string& peer, Deadline deadline, uint64_t pool_id) {
  const int qp_count = conn->qp_count;

  // Each side proves the key before the client sends its endpoints or the
  // blade reveals its pool (smart/resource/handshake.h).
  // Every message so far, for the proofs (smart/resource/auth.h).
  Transcript transcript;
  AuthHello auth_hello;
  auth_hello.has_key = key.has_value();
  auth_hello.nonce = RandomNonce();
  if (key) auth_hello.key_id = key->id();
  // Where this connection goes, as this client sees it: both proofs cover
  // it, and the blade checks it is where the connection arrived.
  auth_hello.dialled = PeerAddress(conn->tcp_fd);
  const std::string auth_frame = auth_hello.Encode();
  transcript.add(auth_frame);
  SendFrame(conn->tcp_fd, auth_frame, peer);
  const std::string challenge_frame = RecvFrame(conn->tcp_fd, peer, kMaxAuthFrame, deadline);
  const AuthChallenge challenge = AuthChallenge::Decode(challenge_frame, peer);
  if (!challenge.error.empty()) {
    const std::string why = "memory blade " + peer + " refused the connection: " + PeerText(challenge.error) +
                            (key ? " (this client's key: " + key->path() + ", ID " + key->id() + ")" : "");
    if (challenge.busy) throw BusyRefusal(why);
    throw Error(why);
  }
  transcript.add(challenge_frame);
  ClientHello hello;
  // Neither a pool other than the one pinned nor, with a key, a blade that
  // proves none gets endpoints or a proof. The blade proves the key in its
  // answer to this hello (handshake.h).
  std::string problem;
  if (pool_id != 0 && challenge.pool_id != pool_id) {
    problem = "it serves pool " + PoolIdText(challenge.pool_id) + ", and this client pins pool " +
              PoolIdText(pool_id) + " for that address (memory_servers' \"pool_id\"): the address reaches "
              "another blade, or the blade's pool was made anew";
  } else if (key && !challenge.has_key) {
    problem = "it proves no key, and this client has one (auth.key_file " + key->path() +
              "): give the memory blade the same key, or remove auth.key_file here";
  }
  if (!problem.empty()) {
    ClientHello give_up;
    give_up.error = "the client does not trust the memory blade: " + problem;
    try {
      SendFrame(conn->tcp_fd, give_up.Encode(), peer);
    } catch (const Error&) {
    }
    throw Error("memory blade " + peer + " failed authentication: " + problem);
  }
  hello.has_proof = key.has_value();
  hello.transport = device->kind();
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (int i = 0; i < qp_count; ++i) {
      QueuePairOptions options;
      options.max_send_wr = config.qp_param.max_wqe_size;
      options.max_recv_wr = 1;
      options.max_sge = config.qp_param.max_sge_size;
      options.max_inline_data = config.qp_param.max_inline_data;
      options.concurrent = shared_qps;
      if (config.thread_aware_alloc.shared_cq) {
        options.cq = ensure_slot(i);
      } else {
        conn->private_cqs.push_back(
            device->create_cq(config.qp_param.max_cqe_size, nullptr, shared_qps));
        options.cq = conn->private_cqs.back().get();
      }
      options.domain = slots[i].domain.get();
      conn->qps.push_back(device->create_qp(options));
      hello.endpoints.push_back(conn->qps.back()->endpoint());
    }
  }
  // The proof covers the endpoints: the blade connects to these or to none.
  transcript.add(hello.EncodeUnproven());
  if (key) hello.proof = key->prove(AuthRole::kClient, transcript);
  SendFrame(conn->tcp_fd, hello.Encode(), peer);
  const std::string reply_frame = RecvFrame(conn->tcp_fd, peer, kMaxHelloFrame, deadline);
  const ServerHello reply = ServerHello::Decode(reply_frame, peer);
  if (!reply.error.empty()) {
    const std::string why = "memory blade " + peer + " refused the connection: " + PeerText(reply.error);
    if (reply.busy) throw BusyRefusal(why);
    throw Error(why);
  }
  if (key) {
    // Nothing in the reply is used before its proof holds.
    transcript.add(Unproven(reply_frame, reply.has_proof));
    if (!reply.has_proof) {
      throw Error("memory blade " + peer + " failed authentication: its answer carries no proof of the key");
    }
    if (!key->verify(AuthRole::kBladeHello, transcript, reply.proof)) {
      throw Error("memory blade " + peer + " failed authentication: its proof does not match this client's key (" +
                  key->path() + ", ID " + key->id() + ") and this handshake: the two sides' auth.key_file "
                  "hold different keys, or messages were altered in transit");
    }
  }
  if (reply.endpoints.size() != static_cast<size_t>(qp_count)) {
    throw Error("memory blade " + peer + " answered with " + std::to_string(reply.endpoints.size()) +
                " queue pairs for " + std::to_string(qp_count));
  }
  if (!reply.window_rkeys.empty() && reply.window_rkeys.size() != static_cast<size_t>(qp_count)) {
    throw Error("memory blade " + peer + " answered with " + std::to_string(reply.window_rkeys.size()) +
                " memory windows for " + std::to_string(qp_count) + " queue pairs");
  }
  std::vector<RemoteRegion> regions(reply.regions, reply.regions + kMemoryRegions);
  for (int i = 0; i < kMemoryRegions; ++i) conn->regions[i] = reply.regions[i];
  conn->window_rkeys = reply.window_rkeys;
  conn->session = reply.session;
  conn->peer = device->import_regions(regions, reply.exported);
  if (reply.session.slot != 0 && reply.regions[kMainMemoryRegion].valid) {
    // Where the memory blade cannot end this session's access itself (shm),
    // the provider checks the session's word before each write (the soft
    // fence; remote_lock.h).
    const RemoteRegion& pool = reply.regions[kMainMemoryRegion];
    conn->peer->guard_session(pool.addr + SessionWordAddress(reply.session.slot), pool.rkey,
                              kSessionAliveBit | reply.session.incarnation);
  }
  for (int i = 0; i < qp_count; ++i) conn->qps[i]->connect(reply.endpoints[i], conn->peer);
  SendByte(conn->tcp_fd, kClientReady, peer);
  if (RecvByte(conn->tcp_fd, peer, deadline) != kServerReady) {
    throw Error("memory blade " + peer + " did not confirm the connection");
  }
  SetSocketTimeouts(conn->tcp_fd, 0);
}

}  // namespace smart
