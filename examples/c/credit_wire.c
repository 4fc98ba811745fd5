/* Receiver-advertised credits and the wire codec from C: a receiver and a
 * sender in one process, talking through encoded bytes. Asserts the grant
 * and replay rules (duplicates and old epochs never mint credit), all-or-
 * nothing reservation, exactly-once release, capacity conservation, and
 * the wire round trip and its typed rejections. Built with -std=c11
 * -Wall -Wextra -Werror and run by ffi/tests/c_examples.rs. */
#include <stdint.h>
#include <string.h>

#include "abi_check.h"
#include "check.h"
#include "railyard.h"

static const ry_session_id SESSION = {0x1111222233334444ULL, 0x5555666677778888ULL};

/* Encodes `m`, decodes the bytes and checks the round trip. */
static size_t wire_round_trip(const ry_wire_message* m, uint8_t* buf, ry_wire_message* back) {
  size_t len = 0;
  OK(ry_wire_encode(m, buf, RY_WIRE_MAX_MESSAGE_LEN, &len));
  CHECK(len > 8 && len <= RY_WIRE_MAX_MESSAGE_LEN);
  CHECK(buf[0] == RY_WIRE_SCHEMA_V1 && buf[1] == 0 && buf[2] == m->msg_type);
  OK(ry_wire_decode(buf, len, back));
  CHECK(back->msg_type == m->msg_type);
  /* Re-encoding the decoded message gives the same bytes. */
  uint8_t again[RY_WIRE_MAX_MESSAGE_LEN];
  size_t len2 = 0;
  OK(ry_wire_encode(back, again, sizeof again, &len2));
  CHECK(len2 == len && memcmp(again, buf, len) == 0);
  return len;
}

static void wire_rejections(void) {
  ry_wire_message m;
  memset(&m, 0, sizeof m);
  m.msg_type = RY_MSG_TYPE_CREDIT_UPDATE;
  m.update.receiver_session = SESSION;
  m.update.epoch = 1;
  m.update.sequence = 1;
  m.update.grants.present = 1u << RY_RESOURCE_DATA_BYTES;
  m.update.grants.v[RY_RESOURCE_DATA_BYTES] = 4096;
  uint8_t buf[RY_WIRE_MAX_MESSAGE_LEN + 1];
  size_t len = 0;
  OK(ry_wire_encode(&m, buf, RY_WIRE_MAX_MESSAGE_LEN, &len));

  ry_wire_message out;
  memset(&out, 0xAB, sizeof out);
  FAILS_WITH(ry_wire_decode(buf, len - 1, &out), RY_STATUS_WIRE_TRUNCATED);
  FAILS_WITH(ry_wire_decode(buf, 3, &out), RY_STATUS_WIRE_TRUNCATED);
  buf[len] = 0;
  FAILS_WITH(ry_wire_decode(buf, len + 1, &out), RY_STATUS_WIRE_TRAILING_BYTES);
  buf[0] = 9; /* schema version 9 */
  FAILS_WITH(ry_wire_decode(buf, len, &out), RY_STATUS_WIRE_UNKNOWN_VERSION);
  buf[0] = RY_WIRE_SCHEMA_V1;
  buf[2] = 77; /* message type */
  FAILS_WITH(ry_wire_decode(buf, len, &out), RY_STATUS_WIRE_UNKNOWN_MESSAGE_TYPE);
  buf[2] = RY_MSG_TYPE_CREDIT_UPDATE;
  buf[3] = 0x80; /* header flags */
  FAILS_WITH(ry_wire_decode(buf, len, &out), RY_STATUS_WIRE_MALFORMED);
  buf[3] = 0;
  /* Epoch 0 is reserved (docs/wire.md): the update's epoch is at body
   * offset 24, after the 8-byte header. */
  uint8_t epoch_bytes[8];
  memcpy(epoch_bytes, buf + 8 + 24, 8);
  memset(buf + 8 + 24, 0, 8);
  FAILS_WITH(ry_wire_decode(buf, len, &out), RY_STATUS_WIRE_MALFORMED);
  memcpy(buf + 8 + 24, epoch_bytes, 8);
  /* Nothing was written on any rejection. */
  const unsigned char* raw = (const unsigned char*)&out;
  for (size_t i = 0; i < sizeof out; i++) CHECK(raw[i] == 0xAB);
  OK(ry_wire_decode(buf, len, &out)); /* intact again */
  CHECK(out.update.grants.v[RY_RESOURCE_DATA_BYTES] == 4096);

  size_t small = 0;
  FAILS_WITH(ry_wire_encode(&m, buf, 10, &small), RY_STATUS_BUFFER_TOO_SMALL);
  m.msg_type = 42;
  FAILS_WITH(ry_wire_encode(&m, buf, sizeof buf, &small), RY_STATUS_INVALID_ARGUMENT);
  m.msg_type = RY_MSG_TYPE_CREDIT_UPDATE;
  m.update.grants.present = 0x10; /* no such resource */
  FAILS_WITH(ry_wire_encode(&m, buf, sizeof buf, &small), RY_STATUS_INVALID_ARGUMENT);
  m.update.grants.present = 1u << RY_RESOURCE_DATA_BYTES;
  m.update.sequence = 0; /* reserved: the encoder never emits it either */
  FAILS_WITH(ry_wire_encode(&m, buf, sizeof buf, &small), RY_STATUS_WIRE_MALFORMED);
  FAILS_WITH(ry_wire_decode(NULL, 8, &out), RY_STATUS_NULL_ARGUMENT);
}

static void expect_available(ry_credit_sender s, uint64_t bytes, uint64_t slots, bool open) {
  ry_charge a;
  bool is_open = !open;
  OK(ry_credit_available(s, 0, 0, &a, &is_open));
  CHECK(a.v[RY_RESOURCE_DATA_BYTES] == bytes);
  CHECK(a.v[RY_RESOURCE_REQUEST_SLOTS] == slots);
  CHECK(is_open == open);
}

int main(void) {
  ry_check_abi();
  wire_rejections();
  uint8_t buf[RY_WIRE_MAX_MESSAGE_LEN];
  ry_wire_message msg, back;

  /* --- receiver: 1 MiB, 16 request slots, 16 consumer slots ------------- */
  ry_charge capacity = {{1u << 20, 16, 4, 16}};
  ry_credit_allocator_config acfg;
  OK(ry_credit_allocator_config_init(SESSION, 2, 1, &capacity, &acfg));
  CHECK(acfg.return_path[RY_RESOURCE_DATA_BYTES] == RY_RETURN_PATH_SENDER_COMPLETION);
  CHECK(acfg.return_path[RY_RESOURCE_CONSUMER_SLOTS] == RY_RETURN_PATH_RECEIVER_CONSUMPTION);
  ry_credit_receiver rx;
  OK(ry_credit_receiver_create(&acfg, &rx));
  uint64_t epoch = 0;
  OK(ry_credit_receiver_open(rx, 0, &epoch));
  CHECK(epoch == 1);

  /* --- sender ------------------------------------------------------------ */
  ry_credit_ledger_config lcfg;
  OK(ry_credit_ledger_config_default(&lcfg));
  ry_credit_sender tx;
  OK(ry_credit_sender_create(&lcfg, &tx));

  /* Capability negotiation over the wire. */
  memset(&msg, 0, sizeof msg);
  msg.msg_type = RY_MSG_TYPE_CAPABILITY_OFFER;
  msg.offer.min_version = 1;
  msg.offer.max_version = 1;
  msg.offer.required = 1;
  msg.offer.max_classes = 1;
  msg.offer.windows.present = RY_RESOURCE_SET_ALL;
  memcpy(msg.offer.windows.v, lcfg.window.v, sizeof msg.offer.windows.v);
  wire_round_trip(&msg, buf, &back);
  CHECK(memcmp(&back.offer, &msg.offer, sizeof msg.offer) == 0);
  memset(&msg, 0, sizeof msg);
  msg.msg_type = RY_MSG_TYPE_CAPABILITY_ANSWER;
  msg.answer.version = 1;
  msg.answer.result = RY_NEGOTIATION_RESULT_ACCEPTED;
  msg.answer.classes = 1;
  msg.answer.receiver_session = SESSION;
  msg.answer.epoch = epoch;
  wire_round_trip(&msg, buf, &back);
  CHECK(back.answer.result == RY_NEGOTIATION_RESULT_ACCEPTED && back.answer.epoch == 1);
  CHECK(back.answer.receiver_session.lo == SESSION.lo &&
        back.answer.receiver_session.hi == SESSION.hi);
  FAILS_WITH(ry_credit_bind(tx, 0, back.answer.receiver_session, 0), RY_STATUS_CREDIT_ZERO_ID);
  OK(ry_credit_bind(tx, 0, back.answer.receiver_session, back.answer.epoch));
  expect_available(tx, 0, 0, false); /* closed until the first update */

  /* --- grant -> bytes -> update ------------------------------------------ */
  ry_charge add = {{512 * 1024, 4, 0, 4}};
  memset(&msg, 0, sizeof msg);
  msg.msg_type = RY_MSG_TYPE_CREDIT_UPDATE;
  OK(ry_credit_receiver_grant(rx, 0, 0, &add, &msg.update));
  CHECK(msg.update.sequence == 1 && msg.update.epoch == 1);
  CHECK(msg.update.grants.v[RY_RESOURCE_REQUEST_SLOTS] == 4);
  size_t update_len = wire_round_trip(&msg, buf, &back);
  CHECK(memcmp(&back.update, &msg.update, sizeof msg.update) == 0);
  uint8_t update_bytes[RY_WIRE_MAX_MESSAGE_LEN];
  memcpy(update_bytes, buf, update_len);

  ry_update_outcome uo;
  OK(ry_credit_apply_update(tx, 0, &back.update, 1000, &uo, NULL));
  CHECK(uo == RY_UPDATE_OUTCOME_APPLIED);
  expect_available(tx, 512 * 1024, 4, true);

  /* Replay safety: the same bytes again are a no-op, never new credit. */
  OK(ry_wire_decode(update_bytes, update_len, &back));
  OK(ry_credit_apply_update(tx, 0, &back.update, 2000, &uo, NULL));
  CHECK(uo == RY_UPDATE_OUTCOME_DUPLICATE);
  expect_available(tx, 512 * 1024, 4, true);
  /* Another session (an old receiver incarnation) or epoch: refused. */
  ry_credit_update forged = back.update;
  forged.receiver_session.lo ^= 1;
  forged.sequence = 9;
  FAILS_WITH(ry_credit_apply_update(tx, 0, &forged, 3000, NULL, NULL),
             RY_STATUS_CREDIT_SESSION_MISMATCH);
  forged = back.update;
  forged.epoch = 7;
  forged.sequence = 9;
  FAILS_WITH(ry_credit_apply_update(tx, 0, &forged, 3000, NULL, NULL),
             RY_STATUS_CREDIT_EPOCH_MISMATCH);
  expect_available(tx, 512 * 1024, 4, true);

  /* --- dispatch: all-or-nothing reserve+commit ---------------------------- */
  ry_charge write64k = {{65536, 1, 0, 1}};
  ry_committed_charge c[4];
  for (int i = 0; i < 4; i++) {
    OK(ry_credit_reserve_commit(tx, 0, 0, &write64k, &c[i], NULL));
    CHECK(c[i].held == 1);
  }
  /* Bytes remain, request slots do not: nothing is taken. */
  ry_committed_charge none;
  uint8_t short_set = 0;
  FAILS_WITH(ry_credit_reserve_commit(tx, 0, 0, &write64k, &none, &short_set),
             RY_STATUS_CREDIT_INSUFFICIENT);
  CHECK(short_set == ((1u << RY_RESOURCE_REQUEST_SLOTS) | (1u << RY_RESOURCE_CONSUMER_SLOTS)));
  expect_available(tx, 256 * 1024, 0, true);
  FAILS_WITH(ry_credit_reserve_commit(tx, 5000, 0, &write64k, &none, NULL),
             RY_STATUS_CREDIT_UNKNOWN_PEER);
  /* An empty charge never passes the gate. */
  ry_charge nothing = {{0, 0, 0, 0}};
  FAILS_WITH(ry_credit_reserve_commit(tx, 0, 0, &nothing, &none, NULL),
             RY_STATUS_CREDIT_EMPTY_CHARGE);

  /* c[0] travels in a token record through the pool. */
  ry_token_pool pool;
  OK(ry_token_pool_create(4, &pool));
  ry_token_record rec;
  memset(&rec, 0, sizeof rec);
  rec.bytes = 4096; /* wrong: must equal the charged DATA_BYTES */
  FAILS_WITH(ry_committed_charge_record_into(&c[0], &rec), RY_STATUS_CREDIT_NOT_RECORDABLE);
  CHECK(c[0].held == 1 && !(rec.holds & RY_HOLDS_CREDIT));
  rec.bytes = 65536;
  OK(ry_committed_charge_record_into(&c[0], &rec));
  CHECK(c[0].held == 0 && (rec.holds & RY_HOLDS_CREDIT) && rec.has_credit_key);
  uint64_t wr_id;
  OK(ry_token_claim(pool, &rec, &wr_id));
  ry_token_record done;
  OK(ry_token_complete(pool, wr_id, &done));
  ry_credit_release_outcome ro;
  OK(ry_credit_release_record(tx, &done, &ro));
  CHECK(ro == RY_CREDIT_RELEASE_OUTCOME_RELEASED && !(done.holds & RY_HOLDS_CREDIT));
  FAILS_WITH(ry_credit_release_record(tx, &done, &ro), RY_STATUS_CREDIT_NOT_HELD);
  for (int i = 1; i < 3; i++) {
    OK(ry_credit_release(tx, &c[i], &ro));
    CHECK(ro == RY_CREDIT_RELEASE_OUTCOME_RELEASED && c[i].held == 0);
  }
  FAILS_WITH(ry_credit_release(tx, &c[1], &ro), RY_STATUS_CREDIT_NOT_HELD);
  /* A forged copy asking for more than is outstanding (only c[3] is) is
   * refused and changes nothing. */
  ry_committed_charge forged_copy = c[1];
  forged_copy.held = 1;
  forged_copy.charge.v[RY_RESOURCE_DATA_BYTES] = 2 * 65536;
  FAILS_WITH(ry_credit_release(tx, &forged_copy, &ro), RY_STATUS_CREDIT_OVER_RELEASE);
  CHECK(forged_copy.held == 1);
  /* Releasing never mints sender credit: availability is unchanged. */
  expect_available(tx, 256 * 1024, 0, true);

  /* --- usage report -> bytes -> receiver ----------------------------------- */
  memset(&msg, 0, sizeof msg);
  msg.msg_type = RY_MSG_TYPE_CREDIT_USAGE;
  OK(ry_credit_usage_report(tx, 0, 0, NULL, &msg.usage));
  CHECK(msg.usage.consumed.v[RY_RESOURCE_DATA_BYTES] == 4 * 65536);
  CHECK(msg.usage.released.v[RY_RESOURCE_DATA_BYTES] == 3 * 65536);
  wire_round_trip(&msg, buf, &back);
  CHECK(memcmp(&back.usage, &msg.usage, sizeof msg.usage) == 0);
  ry_charge returned;
  bool dup = true;
  OK(ry_credit_receiver_on_usage(rx, 0, &back.usage, &returned, &dup));
  CHECK(!dup);
  CHECK(returned.v[RY_RESOURCE_DATA_BYTES] == 3 * 65536);
  CHECK(returned.v[RY_RESOURCE_REQUEST_SLOTS] == 3);
  OK(ry_credit_receiver_on_usage(rx, 0, &back.usage, &returned, &dup));
  CHECK(dup && returned.v[RY_RESOURCE_DATA_BYTES] == 0); /* replayed report */
  /* The receiver's consumer drained three commits' consumer slots. */
  ry_charge consumer3 = {{0, 0, 0, 3}};
  OK(ry_credit_receiver_consumed(rx, 0, 0, &consumer3));
  ry_charge too_many = {{0, 0, 0, 99}};
  FAILS_WITH(ry_credit_receiver_consumed(rx, 0, 0, &too_many), RY_STATUS_CREDIT_OVER_RELEASE);
  bool conserved = false;
  OK(ry_credit_receiver_conserved(rx, &conserved));
  CHECK(conserved);
  ry_charge outstanding;
  OK(ry_credit_receiver_outstanding(rx, 0, 0, &outstanding));
  /* c[3] in flight plus the unused 256 KiB. */
  CHECK(outstanding.v[RY_RESOURCE_DATA_BYTES] == 65536 + 256 * 1024);
  CHECK(outstanding.v[RY_RESOURCE_CONSUMER_SLOTS] == 1);

  /* --- a new epoch fences the old one ---------------------------------------- */
  OK(ry_credit_receiver_open(rx, 0, &epoch));
  CHECK(epoch == 2);
  /* A close for epoch 1 arriving now is stale: it closes nothing. */
  FAILS_WITH(ry_credit_receiver_close(rx, 0, 1), RY_STATUS_CREDIT_EPOCH_MISMATCH);
  OK(ry_credit_bind(tx, 0, SESSION, epoch));
  /* Rebinding an older epoch (a replayed negotiation) is refused. */
  CHECK(ry_credit_bind(tx, 0, SESSION, 1) != RY_STATUS_OK);
  /* c[3]'s completion arrives after the new epoch: fenced, not released
   * into the new epoch. */
  OK(ry_credit_release(tx, &c[3], &ro));
  CHECK(ro == RY_CREDIT_RELEASE_OUTCOME_FENCED);
  ry_charge freed;
  /* Epoch 1's QPs are drained: its fenced capacity comes back. */
  OK(ry_credit_receiver_fence_complete(rx, 0, 1, &freed));
  CHECK(freed.v[RY_RESOURCE_DATA_BYTES] == 65536 + 256 * 1024);
  FAILS_WITH(ry_credit_receiver_fence_complete(rx, 0, 1, &freed), RY_STATUS_CREDIT_NOTHING_FENCING);
  ry_charge free_now;
  OK(ry_credit_receiver_free(rx, &free_now));
  CHECK(free_now.v[RY_RESOURCE_DATA_BYTES] == capacity.v[RY_RESOURCE_DATA_BYTES]);
  CHECK(free_now.v[RY_RESOURCE_REQUEST_SLOTS] == capacity.v[RY_RESOURCE_REQUEST_SLOTS]);

  /* Epoch 2 grant; then a decreasing total is rejected (RFC 2849 rule 5):
     nothing changes, a protocol error is counted, no quarantine. */
  ry_charge add2 = {{128 * 1024, 2, 0, 2}};
  ry_credit_update u2;
  OK(ry_credit_receiver_grant(rx, 0, 0, &add2, &u2));
  OK(ry_credit_apply_update(tx, 0, &u2, 5000, &uo, NULL));
  CHECK(uo == RY_UPDATE_OUTCOME_APPLIED);
  expect_available(tx, 128 * 1024, 2, true);
  ry_credit_update bad = u2;
  bad.sequence += 1;
  bad.grants.v[RY_RESOURCE_DATA_BYTES] -= 1;
  FAILS_WITH(ry_credit_apply_update(tx, 0, &bad, 6000, NULL, NULL), RY_STATUS_CREDIT_DECREASING);
  expect_available(tx, 128 * 1024, 2, true);
  /* A credit violation seen elsewhere (RFC 2849 rule 4): quarantine, and
     dispatch is refused until a new session/epoch is bound. */
  OK(ry_credit_quarantine(tx, 0));
  FAILS_WITH(ry_credit_reserve_commit(tx, 0, 0, &write64k, &none, NULL), RY_STATUS_CREDIT_CLOSED);

  ry_credit_metrics m;
  OK(ry_credit_metrics_get(tx, &m));
  CHECK(m.duplicate_updates >= 1 && m.stale_updates >= 2 && m.protocol_errors == 1);
  CHECK(m.epoch_resets == 1 && m.fenced_ops >= 1 && m.stalls >= 1);

  OK(ry_token_pool_destroy(pool));
  OK(ry_credit_sender_destroy(tx));
  OK(ry_credit_receiver_destroy(rx));
  FAILS_WITH(ry_credit_sender_destroy(tx), RY_STATUS_INVALID_HANDLE);
  printf("railyard C credit/wire example: all checks passed\n");
  return 0;
}
