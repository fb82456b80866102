"""A small llama2.c-style transformer in torch whose attention reads K/V from paged blocks.

Loads karpathy's stories260K (llama2.c legacy v0 checkpoint: 7 int32 header fields, then
fp32 weights; see shared/data/kv-bf16/README.md). The forward has the stand-in worker's
interface (vllm_standin.worker.FakeModel): for each scheduled request it computes positions
[start, end), writes each layer's K (post-RoPE) and V into the paged cache at the request's
slots, and attends over K/V gathered back from the cache, so prefix K/V loaded from the pool
is used exactly as if it had been computed. Every row is computed on its own (no batch-size
dependent BLAS paths), so a hit and a recompute give bitwise-equal logits."""

import struct
from pathlib import Path

import torch


def data_dir():
    """kv-bf16/ with the model: $OPENLAKE_TEST_DATA, else ../shared/data (conftest), or None."""
    from conftest import kv_data_dir

    d = kv_data_dir()
    return d if d and (d / "model" / "stories260K.bin").exists() else None


class TinyLlama:
    def __init__(self, path, layout="fa", kv_dtype=torch.bfloat16):
        raw = Path(path).read_bytes()
        dim, hidden, L, nh, nkv, vocab, seq = struct.unpack("<7i", raw[:28])
        self.shared = vocab > 0
        vocab = abs(vocab)
        self.dim, self.hidden, self.L, self.nh, self.nkv, self.vocab, self.seq_len = (
            dim, hidden, L, nh, nkv, vocab, seq)
        self.hd = dim // nh
        self.kv_dim = nkv * self.hd
        w = torch.frombuffer(bytearray(raw[28:]), dtype=torch.float32)
        off = 0

        def take(*shape):
            nonlocal off
            n = 1
            for s in shape:
                n *= s
            t = w[off:off + n].view(*shape).clone()
            off += n
            return t

        self.tok = take(vocab, dim)
        self.rms_att = take(L, dim)
        self.wq = take(L, dim, dim)
        self.wk = take(L, self.kv_dim, dim)
        self.wv = take(L, self.kv_dim, dim)
        self.wo = take(L, dim, dim)
        self.rms_ffn = take(L, dim)
        self.w1 = take(L, hidden, dim)
        self.w2 = take(L, dim, hidden)
        self.w3 = take(L, hidden, dim)
        self.rms_final = take(dim)
        off += seq * self.hd  # freq_cis_real + freq_cis_imag (seq * hd/2 each)
        self.wcls = self.tok if self.shared else take(vocab, dim)
        self.layout = layout
        self.kv_dtype = kv_dtype
        self.positions_computed = 0
        i = torch.arange(0, self.hd, 2, dtype=torch.float32)
        self.inv_freq = 1.0 / (10000.0 ** (i / self.hd))

    # -- pieces
    @staticmethod
    def _rms(x, g):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * g

    def _rope(self, x, pos, nheads):
        """x: [n, nheads*hd]; rotate interleaved pairs (llama2.c run.c)."""
        n = x.shape[0]
        x = x.view(n, nheads, self.hd // 2, 2)
        ang = pos.view(n, 1, 1).float() * self.inv_freq.view(1, 1, -1)
        c, s = torch.cos(ang), torch.sin(ang)
        x0, x1 = x[..., 0], x[..., 1]
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).view(n, nheads * self.hd)

    @staticmethod
    def _rows(x, w):
        """x @ w.T one row at a time: results independent of how many rows are batched."""
        return torch.stack([torch.mv(w, r) for r in x]) if x.shape[0] else x.new_zeros(0, w.shape[0])

    def make_kv_caches(self, num_blocks, block_size, layout=None):
        import vllm_standin.worker as w

        return w.make_kv_caches(layout or self.layout, self.L, num_blocks, block_size, self.nkv,
                                self.hd, dtype=self.kv_dtype)

    # -- the paged forward (stand-in worker interface)
    def forward(self, kv_caches, reqs, hooks):
        from vllm_standin.worker import read_kv, slots, write_kv

        names = list(kv_caches)
        xs = {}
        for r in reqs:
            toks = torch.tensor(r.tokens[r.start:r.end], dtype=torch.long)
            xs[r.req_id] = self.tok[toks].clone()
        for li, name in enumerate(names):
            hooks.before_layer(name)
            t = kv_caches[name]
            for r in reqs:
                xs[r.req_id] = self._layer(li, t, r, xs[r.req_id], read_kv, slots, write_kv)
            hooks.after_layer(name, t)
        out = {}
        for r in reqs:
            self.positions_computed += r.end - r.start
            if r.end == len(r.tokens):
                x = self._rms(xs[r.req_id][-1:], self.rms_final)
                logits = self._rows(x, self.wcls)[0]
                out[r.req_id] = (int(torch.argmax(logits)), logits)
        return out

    def _layer(self, li, t, r, x, read_kv, slots, write_kv):
        n = r.end - r.start
        pos = torch.arange(r.start, r.end)
        xn = self._rms(x, self.rms_att[li])
        q = self._rope(self._rows(xn, self.wq[li]), pos, self.nh)
        k = self._rope(self._rows(xn, self.wk[li]), pos, self.nkv)
        v = self._rows(xn, self.wv[li])
        b, o = slots(r.block_ids, r.start, r.end, r.bs)
        write_kv(t, self.layout, b, o, k.view(n, self.nkv, self.hd).to(t.dtype),
                 v.view(n, self.nkv, self.hd).to(t.dtype))
        b, o = slots(r.block_ids, 0, r.end, r.bs)
        K, V = read_kv(t, self.layout, b, o)  # [end, nkv, hd] from the paged cache
        K, V = K.float(), V.float()
        rep = self.nh // self.nkv
        att_out = []
        for i in range(n):
            p = r.start + i
            qi = q[i].view(self.nh, self.hd)
            kk = K[:p + 1].repeat_interleave(rep, dim=1)  # [p+1, nh, hd]
            vv = V[:p + 1].repeat_interleave(rep, dim=1)
            sc = (kk * qi.unsqueeze(0)).sum(-1) / (self.hd ** 0.5)  # [p+1, nh]
            a = torch.softmax(sc, dim=0)
            att_out.append((a.unsqueeze(-1) * vv).sum(0).reshape(-1))
        h = x + self._rows(torch.stack(att_out), self.wo[li])
        hn = self._rms(h, self.rms_ffn[li])
        g = self._rows(hn, self.w1[li])
        u = self._rows(hn, self.w3[li])
        return h + self._rows(torch.nn.functional.silu(g) * u, self.w2[li])


def load(layout="fa", kv_dtype=torch.bfloat16):
    d = data_dir()
    if d is None:
        return None
    return TinyLlama(d / "model" / "stories260K.bin", layout=layout, kv_dtype=kv_dtype)
