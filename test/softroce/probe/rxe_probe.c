/*
 * rxe_probe: small experiments against an RDMA device (meant for Soft-RoCE in
 * the test guest) that print facts the project relies on, one "key: value"
 * per line.
 *
 *   rxe_probe [-d DEV] [-g GID_INDEX] attrs       device/port limits, inline data,
 *                                                 thread domain, parent domain
 *   rxe_probe [-d DEV] [-g GID_INDEX] loopback    RC pair in one process: WRITE,
 *                                                 READ, CAS, FAA, max_rd_atomic limits,
 *                                                 small latency figures
 *   rxe_probe [-d DEV] [-g GID_INDEX] hugepage [N] register MAP_HUGETLB memory; if
 *                                                 none is reserved and N > 0, reserve
 *                                                 N pages (root) and retry
 *   rxe_probe [-d DEV] [-g GID_INDEX] peer-kill [TIMEOUT RETRY_CNT [MAX_WAIT_S]]
 *                                                 fork a peer, stream RDMA WRITEs to it,
 *                                                 SIGKILL it, report the first error
 *                                                 completion and how long it took (or
 *                                                 that none came within MAX_WAIT_S)
 *
 * Exit status is 0 when every experiment ran (a "no" answer is not a failure)
 * and 1 when something that must work on any verbs device did not.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static const char *dev_name;
static int gid_index = 1;
static const uint8_t port_num = 1;

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "rxe_probe: " __VA_ARGS__);                            \
        fputc('\n', stderr);                                                   \
        exit(1);                                                               \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct ibv_context *open_dev(void)
{
    int n;
    struct ibv_device **list = ibv_get_device_list(&n);
    struct ibv_context *ctx = NULL;

    if (!list || n == 0)
        FAIL("no RDMA device found");
    for (int i = 0; i < n; i++) {
        if (dev_name && strcmp(dev_name, ibv_get_device_name(list[i])))
            continue;
        ctx = ibv_open_device(list[i]);
        if (!ctx)
            FAIL("ibv_open_device(%s): %s", ibv_get_device_name(list[i]), strerror(errno));
        break;
    }
    ibv_free_device_list(list);
    if (!ctx)
        FAIL("device %s not found", dev_name);
    return ctx;
}

static const char *atomic_cap_str(enum ibv_atomic_cap c)
{
    switch (c) {
    case IBV_ATOMIC_NONE: return "IBV_ATOMIC_NONE";
    case IBV_ATOMIC_HCA: return "IBV_ATOMIC_HCA";
    case IBV_ATOMIC_GLOB: return "IBV_ATOMIC_GLOB";
    }
    return "?";
}

/* ------------------------------------------------------------------ RC QPs */

struct ep {
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    void *buf;
    size_t len;
};

struct wire { /* what peers exchange to connect */
    uint32_t qpn, psn, rkey;
    uint64_t addr;
    union ibv_gid gid;
};

static struct ibv_qp *create_rc_qp(struct ibv_pd *pd, struct ibv_cq *cq,
                                   uint32_t max_inline, struct ibv_qp_cap *out)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 64, .max_recv_wr = 16, .max_send_sge = 1,
                 .max_recv_sge = 1, .max_inline_data = max_inline },
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &ia);
    if (qp && out)
        *out = ia.cap;
    return qp;
}

static void ep_init(struct ibv_context *ctx, struct ep *e, void *buf, size_t len)
{
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

    e->pd = ibv_alloc_pd(ctx);
    if (!e->pd)
        FAIL("ibv_alloc_pd: %s", strerror(errno));
    e->cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
    if (!e->cq)
        FAIL("ibv_create_cq: %s", strerror(errno));
    e->qp = create_rc_qp(e->pd, e->cq, 0, NULL);
    if (!e->qp)
        FAIL("ibv_create_qp(RC): %s", strerror(errno));
    e->len = len;
    e->buf = buf;
    if (!e->buf) {
        e->buf = aligned_alloc(4096, len);
        if (!e->buf)
            FAIL("out of memory");
    }
    memset(e->buf, 0, len);
    e->mr = ibv_reg_mr(e->pd, e->buf, len, access);
    if (!e->mr)
        FAIL("ibv_reg_mr: %s", strerror(errno));
}

static struct wire ep_wire(struct ibv_context *ctx, struct ep *e)
{
    struct wire w = { .qpn = e->qp->qp_num, .psn = 0x1000 + e->qp->qp_num,
                      .rkey = e->mr->rkey, .addr = (uintptr_t)e->buf };
    if (ibv_query_gid(ctx, port_num, gid_index, &w.gid))
        FAIL("ibv_query_gid(%d): %s", gid_index, strerror(errno));
    return w;
}

/* RESET -> INIT -> RTR -> RTS; returns 0 or the failing errno. */
static int ep_connect(struct ep *e, const struct wire *self, const struct wire *peer,
                      uint8_t timeout, uint8_t retry_cnt, uint8_t rd_atomic)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .port_num = port_num, .pkey_index = 0,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
    };
    int r = ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                         IBV_QP_ACCESS_FLAGS);
    if (r)
        return r;

    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer->qpn;
    a.rq_psn = peer->psn;
    a.max_dest_rd_atomic = rd_atomic;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer->gid;
    a.ah_attr.grh.sgid_index = gid_index;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = port_num;
    r = ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (r)
        return r;

    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = retry_cnt;
    a.rnr_retry = 7;
    a.sq_psn = self->psn;
    a.max_rd_atomic = rd_atomic;
    return ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                        IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                        IBV_QP_MAX_QP_RD_ATOMIC);
}

static int post(struct ep *e, enum ibv_wr_opcode op, uint64_t wr_id, void *local,
                uint32_t len, const struct wire *peer, uint64_t roff,
                uint64_t cmp_add, uint64_t swap)
{
    struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len, .lkey = e->mr->lkey };
    struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
                              .opcode = op, .send_flags = IBV_SEND_SIGNALED }, *bad;
    if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        wr.wr.atomic.remote_addr = peer->addr + roff;
        wr.wr.atomic.rkey = peer->rkey;
        wr.wr.atomic.compare_add = cmp_add;
        wr.wr.atomic.swap = swap;
    } else {
        wr.wr.rdma.remote_addr = peer->addr + roff;
        wr.wr.rdma.rkey = peer->rkey;
    }
    return ibv_post_send(e->qp, &wr, &bad);
}

/* Wait for one completion; returns its status, or -1 on timeout. */
static int wait_one(struct ibv_cq *cq, double limit_s, struct ibv_wc *out)
{
    struct ibv_wc wc;
    double end = now_s() + limit_s;
    for (;;) {
        int n = ibv_poll_cq(cq, 1, &wc);
        if (n < 0)
            FAIL("ibv_poll_cq failed");
        if (n == 1) {
            if (out)
                *out = wc;
            return wc.status;
        }
        if (now_s() > end)
            return -1;
    }
}

static int run_one(struct ep *e, enum ibv_wr_opcode op, void *local, uint32_t len,
                   const struct wire *peer, uint64_t roff, uint64_t a, uint64_t b)
{
    int r = post(e, op, 1, local, len, peer, roff, a, b);
    if (r)
        return -r;
    return wait_one(e->cq, 10.0, NULL);
}

/* ------------------------------------------------------------------ attrs */

static int cmd_attrs(void)
{
    struct ibv_context *ctx = open_dev();
    struct ibv_device_attr_ex ax;
    struct ibv_port_attr pa;
    union ibv_gid gid;
    char gs[64];

    if (ibv_query_device_ex(ctx, NULL, &ax))
        FAIL("ibv_query_device_ex: %s", strerror(errno));
    struct ibv_device_attr *d = &ax.orig_attr;
    printf("device: %s\n", ibv_get_device_name(ctx->device));
    printf("fw_ver: %s\n", d->fw_ver);
    printf("max_mr_size: %" PRIu64 " (0x%" PRIx64 ")\n", (uint64_t)d->max_mr_size,
           (uint64_t)d->max_mr_size);
    printf("page_size_cap: 0x%" PRIx64 "\n", (uint64_t)d->page_size_cap);
    printf("max_qp: %d\nmax_qp_wr: %d\nmax_sge: %d\nmax_cq: %d\nmax_cqe: %d\n",
           d->max_qp, d->max_qp_wr, d->max_sge, d->max_cq, d->max_cqe);
    printf("max_mr: %d\nmax_pd: %d\nmax_srq: %d\nmax_srq_wr: %d\n", d->max_mr,
           d->max_pd, d->max_srq, d->max_srq_wr);
    printf("max_qp_rd_atom: %d\nmax_qp_init_rd_atom: %d\nmax_res_rd_atom: %d\n",
           d->max_qp_rd_atom, d->max_qp_init_rd_atom, d->max_res_rd_atom);
    printf("atomic_cap: %s (%d)\n", atomic_cap_str(d->atomic_cap), d->atomic_cap);
    printf("device_cap_flags: 0x%x\n", d->device_cap_flags);
    printf("odp_general_caps: 0x%" PRIx64 "\n", (uint64_t)ax.odp_caps.general_caps);
    printf("odp_rc_caps: 0x%x\n", ax.odp_caps.per_transport_caps.rc_odp_caps);
    printf("device_cap_flags_ex: 0x%" PRIx64 "\n", (uint64_t)ax.device_cap_flags_ex);

    if (ibv_query_port(ctx, port_num, &pa))
        FAIL("ibv_query_port: %s", strerror(errno));
    printf("port_state: %d\nactive_mtu: %d\nmax_msg_sz: %u\ngid_tbl_len: %d\n", pa.state,
           128 << pa.active_mtu, pa.max_msg_sz, pa.gid_tbl_len);
    if (ibv_query_gid(ctx, port_num, gid_index, &gid))
        FAIL("ibv_query_gid: %s", strerror(errno));
    snprintf(gs, sizeof gs, "%02x%02x", gid.raw[0], gid.raw[1]);
    for (int i = 2; i < 16; i += 2)
        snprintf(gs + strlen(gs), sizeof gs - strlen(gs), ":%02x%02x", gid.raw[i], gid.raw[i + 1]);
    printf("gid[%d]: %s\n", gid_index, gs);

    /* Largest max_inline_data that ibv_create_qp accepts for an RC QP. */
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    if (!pd || !cq)
        FAIL("pd/cq: %s", strerror(errno));
    uint32_t lo = 0, hi = 1u << 20;
    struct ibv_qp_cap cap;
    struct ibv_qp *qp = create_rc_qp(pd, cq, 0, &cap);
    if (!qp)
        FAIL("ibv_create_qp(RC, inline 0): %s", strerror(errno));
    printf("rc_inline_0_reported: %u\n", cap.max_inline_data);
    ibv_destroy_qp(qp);
    while (lo < hi) { /* invariant: lo accepted, hi+1.. unknown */
        uint32_t mid = lo + (hi - lo + 1) / 2;
        qp = create_rc_qp(pd, cq, mid, NULL);
        if (qp) {
            ibv_destroy_qp(qp);
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    qp = create_rc_qp(pd, cq, lo, &cap);
    printf("rc_max_inline_data_accepted: %u\n", lo);
    if (qp) {
        struct ibv_qp_attr qa;
        struct ibv_qp_init_attr qia;
        printf("rc_max_inline_data_reported: %u\n", cap.max_inline_data);
        if (!ibv_query_qp(qp, &qa, IBV_QP_CAP, &qia))
            printf("rc_max_inline_data_query_qp: %u\n", qa.cap.max_inline_data);
        ibv_destroy_qp(qp);
    }
    qp = create_rc_qp(pd, cq, lo + 1, NULL);
    printf("rc_inline_%u: %s\n", lo + 1, qp ? "accepted" : strerror(errno));
    if (qp)
        ibv_destroy_qp(qp);

    /* Thread domain and parent domain. */
    struct ibv_td_init_attr tda = { .comp_mask = 0 };
    errno = 0;
    struct ibv_td *td = ibv_alloc_td(ctx, &tda);
    printf("ibv_alloc_td: %s\n", td ? "ok" : strerror(errno));
    struct ibv_parent_domain_init_attr pda = { .pd = pd, .td = NULL, .comp_mask = 0 };
    errno = 0;
    struct ibv_pd *ppd = ibv_alloc_parent_domain(ctx, &pda);
    printf("ibv_alloc_parent_domain(td=NULL): %s\n", ppd ? "ok" : strerror(errno));
    if (ppd)
        ibv_dealloc_pd(ppd);
    if (td) {
        pda.td = td;
        errno = 0;
        ppd = ibv_alloc_parent_domain(ctx, &pda);
        printf("ibv_alloc_parent_domain(td): %s\n", ppd ? "ok" : strerror(errno));
        if (ppd)
            ibv_dealloc_pd(ppd);
        ibv_dealloc_td(td);
    }
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    return 0;
}

/* ------------------------------------------------------------------ loopback */

struct pair {
    struct ibv_context *ctx;
    struct ep a, b;
    struct wire wa, wb;
};

static int pair_up(struct pair *p, void *buf_b, size_t len, uint8_t rd_atomic)
{
    int r;
    p->ctx = open_dev();
    ep_init(p->ctx, &p->a, NULL, 1 << 16);
    ep_init(p->ctx, &p->b, buf_b, len);
    p->wa = ep_wire(p->ctx, &p->a);
    p->wb = ep_wire(p->ctx, &p->b);
    if ((r = ep_connect(&p->a, &p->wa, &p->wb, 14, 7, rd_atomic)))
        return r;
    return ep_connect(&p->b, &p->wb, &p->wa, 14, 7, rd_atomic);
}

static double lat_us(struct pair *p, enum ibv_wr_opcode op, int iters)
{
    uint64_t *l = p->a.buf;
    double t0 = now_s();
    for (int i = 0; i < iters; i++)
        if (run_one(&p->a, op, l, 8, &p->wb, 64, 0, 0) != IBV_WC_SUCCESS)
            return -1;
    return (now_s() - t0) * 1e6 / iters;
}

static int cmd_loopback(void)
{
    struct pair p;
    int bad = 0, r;
    struct ibv_device_attr d;

    r = pair_up(&p, NULL, 1 << 16, 1);
    if (r)
        FAIL("connect loopback pair: %s", strerror(r));
    uint8_t *la = p.a.buf, *lb = p.b.buf;

    for (int i = 0; i < 4096; i++)
        la[i] = (uint8_t)(i * 7 + 3);
    r = run_one(&p.a, IBV_WR_RDMA_WRITE, la, 4096, &p.wb, 0, 0, 0);
    int ok = r == IBV_WC_SUCCESS && !memcmp(la, lb, 4096);
    printf("loopback_rdma_write_4k: %s\n", ok ? "ok" : "FAILED");
    bad |= !ok;

    for (int i = 0; i < 4096; i++)
        lb[8192 + i] = (uint8_t)(i * 13 + 1);
    r = run_one(&p.a, IBV_WR_RDMA_READ, la + 8192, 4096, &p.wb, 8192, 0, 0);
    ok = r == IBV_WC_SUCCESS && !memcmp(la + 8192, lb + 8192, 4096);
    printf("loopback_rdma_read_4k: %s\n", ok ? "ok" : "FAILED");
    bad |= !ok;

    uint64_t *ra = (uint64_t *)(lb + 16384), *res = (uint64_t *)(la + 16384);
    *ra = 41;
    r = run_one(&p.a, IBV_WR_ATOMIC_CMP_AND_SWP, res, 8, &p.wb, 16384, 41, 1234);
    ok = r == IBV_WC_SUCCESS && *res == 41 && *ra == 1234;
    r = run_one(&p.a, IBV_WR_ATOMIC_CMP_AND_SWP, res, 8, &p.wb, 16384, 41, 99);
    ok = ok && r == IBV_WC_SUCCESS && *res == 1234 && *ra == 1234;
    printf("loopback_cas: %s\n", ok ? "ok" : "FAILED");
    bad |= !ok;
    r = run_one(&p.a, IBV_WR_ATOMIC_FETCH_AND_ADD, res, 8, &p.wb, 16384, 10, 0);
    ok = r == IBV_WC_SUCCESS && *res == 1234 && *ra == 1244;
    printf("loopback_faa: %s\n", ok ? "ok" : "FAILED");
    bad |= !ok;
    r = run_one(&p.a, IBV_WR_ATOMIC_FETCH_AND_ADD, res, 8, &p.wb, 16384 + 4, 1, 0);
    printf("loopback_faa_misaligned_status: %s\n",
           r >= 0 ? ibv_wc_status_str(r) : strerror(-r));

    printf("loopback_lat_write_8b_us: %.1f\n", lat_us(&p, IBV_WR_RDMA_WRITE, 500));
    printf("loopback_lat_read_8b_us: %.1f\n", lat_us(&p, IBV_WR_RDMA_READ, 500));
    printf("loopback_lat_faa_us: %.1f\n", lat_us(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, 500));

    /* Which max_rd_atomic / max_dest_rd_atomic values modify_qp accepts. */
    if (ibv_query_device(p.ctx, &d))
        FAIL("ibv_query_device");
    int lim[] = { d.max_qp_init_rd_atom, d.max_qp_init_rd_atom + 1, 16, 64, 128, 255 };
    for (unsigned i = 0; i < sizeof lim / sizeof lim[0]; i++) {
        struct ibv_qp_cap cap;
        struct ibv_qp *qp = create_rc_qp(p.a.pd, p.a.cq, 0, &cap);
        struct ep tmp = p.a;
        if (!qp)
            FAIL("create_qp");
        tmp.qp = qp;
        struct wire w = p.wa;
        w.qpn = qp->qp_num;
        r = ep_connect(&tmp, &w, &p.wb, 14, 7, (uint8_t)lim[i]);
        printf("modify_qp_rd_atomic_%d: %s\n", lim[i], r ? strerror(r) : "accepted");
        if (!r) {
            struct ibv_qp_attr qa;
            struct ibv_qp_init_attr qia;
            if (!ibv_query_qp(qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &qia))
                printf("  query_qp: max_rd_atomic=%d max_dest_rd_atomic=%d\n",
                       qa.max_rd_atomic, qa.max_dest_rd_atomic);
        }
        ibv_destroy_qp(qp);
    }
    return bad;
}

/* ------------------------------------------------------------------ hugepage */

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static int write_long(const char *path, long v)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int r = fprintf(f, "%ld\n", v) < 0;
    return fclose(f) || r ? -1 : 0;
}

static int cmd_hugepage(long reserve)
{
    const size_t len = 2u << 20;
    const char *nr = "/proc/sys/vm/nr_hugepages";
    long before = read_long(nr);
    int bad = 0;

    printf("nr_hugepages: %ld\n", before);
    void *buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    printf("mmap_hugetlb_2m: %s\n", buf == MAP_FAILED ? strerror(errno) : "ok");
    if (buf == MAP_FAILED && reserve > 0) {
        if (write_long(nr, before + reserve) == 0) {
            printf("reserved_hugepages: %ld\n", read_long(nr));
            buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
            printf("mmap_hugetlb_2m_after_reserve: %s\n",
                   buf == MAP_FAILED ? strerror(errno) : "ok");
        } else {
            printf("reserve_hugepages: %s\n", strerror(errno));
        }
    }
    if (buf != MAP_FAILED) {
        struct pair p;
        int r = pair_up(&p, buf, len, 1);
        printf("ibv_reg_mr_hugetlb: ok\n");
        if (r)
            FAIL("connect loopback pair: %s", strerror(r));
        uint8_t *la = p.a.buf;
        for (int i = 0; i < 4096; i++)
            la[i] = (uint8_t)(i ^ 0x5a);
        /* Write across the middle of the huge page and read it back. */
        r = run_one(&p.a, IBV_WR_RDMA_WRITE, la, 4096, &p.wb, len / 2 - 2048, 0, 0);
        int ok = r == IBV_WC_SUCCESS && !memcmp(la, (uint8_t *)buf + len / 2 - 2048, 4096);
        r = run_one(&p.a, IBV_WR_RDMA_READ, la + 8192, 4096, &p.wb, len / 2 - 2048, 0, 0);
        ok = ok && r == IBV_WC_SUCCESS && !memcmp(la, la + 8192, 4096);
        printf("rdma_into_hugetlb_mr: %s\n", ok ? "ok" : "FAILED");
        bad |= !ok;
        ibv_dereg_mr(p.b.mr);
        munmap(buf, len);
    }
    if (read_long(nr) != before && before >= 0)
        write_long(nr, before);
    return bad;
}

/* ------------------------------------------------------------------ peer-kill */

static void xfer(int fd, void *p, size_t n, int out)
{
    while (n) {
        ssize_t r = out ? write(fd, p, n) : read(fd, p, n);
        if (r <= 0)
            FAIL("peer socket %s failed", out ? "write" : "read");
        p = (char *)p + r;
        n -= r;
    }
}

static int cmd_peer_kill(int timeout, int retry_cnt, double max_wait)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        FAIL("socketpair: %s", strerror(errno));
    /* Fork before any verbs resource exists in this process. */
    pid_t pid = fork();
    if (pid < 0)
        FAIL("fork: %s", strerror(errno));
    int fd = pid == 0 ? sv[1] : sv[0];
    close(pid == 0 ? sv[0] : sv[1]);

    struct ibv_context *ctx = open_dev();
    struct ep e;
    ep_init(ctx, &e, NULL, 1 << 20);
    struct wire self = ep_wire(ctx, &e), peer;
    xfer(fd, &self, sizeof self, 1);
    xfer(fd, &peer, sizeof peer, 0);
    int r = ep_connect(&e, &self, &peer, (uint8_t)timeout, (uint8_t)retry_cnt, 1);
    if (r)
        FAIL("connect: %s", strerror(r));
    char c = 'r';
    xfer(fd, &c, 1, 1);
    xfer(fd, &c, 1, 0);
    if (pid == 0) {
        for (;;)
            pause(); /* the parent kills us */
    }

    /* Stream 4 KiB RDMA WRITEs with up to 16 in flight. */
    const int window = 16;
    int inflight = 0;
    uint64_t posted = 0, done_before = 0, ok_after = 0;
    double t_start = now_s(), t_kill = 0, t_err = 0, limit = 0;
    int killed = 0, first_status = -1, flushed = 0, other = 0;
    struct ibv_wc wc[16];

    for (;;) {
        while (!t_err && inflight < window) {
            if (post(&e, IBV_WR_RDMA_WRITE, posted, e.buf, 4096, &peer,
                     (posted % 256) * 4096, 0, 0))
                break;
            posted++;
            inflight++;
        }
        int n = ibv_poll_cq(e.cq, 16, wc);
        if (n < 0)
            FAIL("ibv_poll_cq");
        for (int i = 0; i < n; i++) {
            inflight--;
            if (wc[i].status == IBV_WC_SUCCESS) {
                if (killed)
                    ok_after++;
                else
                    done_before++;
            } else if (first_status < 0) {
                first_status = wc[i].status;
                t_err = now_s();
            } else if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
                flushed++;
            } else {
                other++;
            }
        }
        double t = now_s();
        if (!killed && t - t_start > 0.5) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            t_kill = now_s();
            killed = 1;
            limit = t_kill + max_wait;
        }
        if (t_err && inflight == 0)
            break;
        if (killed && t > limit)
            break;
    }
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    ibv_query_qp(e.qp, &qa, IBV_QP_STATE, &qia);
    const char *st = qa.qp_state == IBV_QPS_ERR ? "ERR" : qa.qp_state == IBV_QPS_RTS ? "RTS" : "other";
    printf("peer_kill_params: timeout=%d retry_cnt=%d (IB formula: %.3f s per try, %.3f s total)\n",
           timeout, retry_cnt, 4.096e-6 * (1u << timeout),
           4.096e-6 * (1u << timeout) * (retry_cnt + 1));
    printf("peer_kill_writes_before_kill: %" PRIu64 "\n", done_before);
    printf("peer_kill_writes_ok_after_kill: %" PRIu64 "\n", ok_after);
    if (first_status < 0) {
        printf("peer_kill_first_error_status: none (no completion at all within %.0f s; "
               "%d WRs still outstanding)\n", max_wait, inflight);
        printf("peer_kill_seconds_to_error: never (gave up after %.0f s)\n", max_wait);
        printf("peer_kill_qp_state_after: %s\n", st);
        fflush(stdout);
        _exit(0); /* skip teardown of a QP that still has work queued */
    }
    printf("peer_kill_first_error_status: %s (%d)\n", ibv_wc_status_str(first_status),
           first_status);
    printf("peer_kill_seconds_to_error: %.3f\n", t_err - t_kill);
    printf("peer_kill_then_flushed: %d (other statuses: %d)\n", flushed, other);
    printf("peer_kill_qp_state_after: %s\n", st);
    return 0;
}

int main(int argc, char **argv)
{
    int opt;
    setvbuf(stdout, NULL, _IOLBF, 0);
    dev_name = getenv("SOFTROCE_DEV");
    if (getenv("SOFTROCE_GID_INDEX"))
        gid_index = atoi(getenv("SOFTROCE_GID_INDEX"));
    while ((opt = getopt(argc, argv, "+d:g:")) != -1) {
        switch (opt) {
        case 'd': dev_name = optarg; break;
        case 'g': gid_index = atoi(optarg); break;
        default: return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "usage: rxe_probe [-d DEV] [-g GID] attrs|loopback|hugepage [N]|peer-kill [T R [WAIT]]\n");
        return 2;
    }
    const char *cmd = argv[optind];
    if (!strcmp(cmd, "attrs"))
        return cmd_attrs();
    if (!strcmp(cmd, "loopback"))
        return cmd_loopback();
    if (!strcmp(cmd, "hugepage"))
        return cmd_hugepage(optind + 1 < argc ? atol(argv[optind + 1]) : 0);
    if (!strcmp(cmd, "peer-kill"))
        return cmd_peer_kill(optind + 1 < argc ? atoi(argv[optind + 1]) : 14,
                             optind + 2 < argc ? atoi(argv[optind + 2]) : 7,
                             optind + 3 < argc ? atof(argv[optind + 3]) : 30);
    fprintf(stderr, "rxe_probe: unknown experiment '%s'\n", cmd);
    return 2;
}
