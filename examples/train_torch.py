#!/usr/bin/python3
"""Trains a small English->German seq2seq model (GRU or LSTM encoder-decoder with attention)
with PyTorch on the CPU and writes one row per iteration to an iteration trace
(docs/trace-csv.md): iter,seq_len,batch,tokens,time_ns,cpu_ns.

The Python twin of seqpoint-train (examples/seq2seq_trainer.cpp), for traces of a real
PyTorch training loop: warm-up included, random or bucketed batching, and an optional real
slowdown from the middle of the run on (--slowdown-at: a busy-loop process pinned to the
trainer's CPU, so the wall time of an iteration grows while its CPU time does not).

    /usr/bin/python3 examples/train_torch.py --model gru --batching bucketed \\
        --iterations 1500 --trace /tmp/gru_bucketed.csv

Data-parallel (--ddp): this process is one rank of a job whose launcher set its rank and the
job's size (torchrun: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; srun: SLURM_PROCID/SLURM_NTASKS;
mpirun: OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE; MPICH: PMI_RANK/PMI_SIZE). The model is
wrapped in DistributedDataParallel over gloo (CPU), so every iteration's backward all-reduces
the gradients and a step is as slow as its slowest rank; rank r trains on batches r, r+N, ... of
the shared batch order, so the ranks' SLs differ within a step. Each rank writes its own trace
(--trace with {rank}), with the CLOCK_MONOTONIC begin and end of each iteration
(mono_begin_ns, mono_end_ns) so the ranks' iterations can be joined into steps.
examples/launch_ddp.py starts N ranks with the environment of torchrun, srun or mpirun.

Needs only Python 3 and torch (Debian's python3-torch). Iterations are marked for the SeqPoint
agent through sdk/python/seqpoint_probe when that module and its library load; without them
the trainer runs the same, unmarked.
"""

import argparse
import collections
import lzma
import os
import random
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_CORPUS = os.path.join(HERE, "data", "ende_debian_catalogs.tsv.xz")
FORMAT_HINT = ("a corpus is UTF-8 text with one pair a line, English<TAB>German[<TAB>source], "
               "plain .tsv or .tsv.xz, e.g. examples/data/ende_debian_catalogs.tsv.xz")

PAD, UNK, BOS, EOS = 0, 1, 2, 3

# The tokenizer of examples/corpus.cpp, on UTF-8 bytes: each ASCII punctuation character is a
# token (C-locale ispunct), bytes <= 0x20 and 0x7f separate, everything else (non-ASCII bytes
# included) makes words; bytes.lower() folds ASCII letters only, as the C++ trainer does.
_PUNCT = rb"!-/:-@\[-`{-~"
_TOKEN = re.compile(rb"[" + _PUNCT + rb"]|[^\x00-\x20\x7f" + _PUNCT + rb"]+")


class UsageError(Exception):
    pass


def tokenize(text):
    return _TOKEN.findall(text.lower())


def positive_int(name):
    def parse(value):
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError("%s must be a positive integer, got %r" %
                                             (name, value))
        if n < 1:
            raise argparse.ArgumentTypeError("%s must be at least 1, got %d" % (name, n))
        return n
    return parse


def fraction(value):
    try:
        f = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError("--slowdown-at must be a number in [0, 1), got %r" %
                                         value)
    if not 0.0 <= f < 1.0:
        raise argparse.ArgumentTypeError(
            "--slowdown-at must be a fraction of the iterations in [0, 1) (0.5: from the "
            "middle on), got %s" % value)
    return f


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Train a small en->de seq2seq GRU/LSTM with PyTorch (CPU) and write the "
                    "iteration trace iter,seq_len,batch,tokens,time_ns,cpu_ns "
                    "(docs/trace-csv.md).")
    p.add_argument("--trace", required=True, metavar="FILE",
                   help="iteration trace to write (CSV); written to FILE.partial and renamed "
                        "when the run completes")
    p.add_argument("--corpus", default=DEFAULT_CORPUS, metavar="FILE",
                   help="English<TAB>German pairs, .tsv or .tsv.xz (default: %(default)s)")
    p.add_argument("--model", choices=("gru", "lstm"), default="gru",
                   help="recurrent cell of encoder and decoder (default: %(default)s)")
    p.add_argument("--iterations", type=positive_int("--iterations"), default=1000,
                   metavar="N", help="training iterations, every one traced (default: "
                                     "%(default)s)")
    p.add_argument("--batch", type=positive_int("--batch"), default=32, metavar="B",
                   help="sentence pairs per batch (default: %(default)s)")
    p.add_argument("--batching", choices=("random", "bucketed"), default="random",
                   help="random: shuffled pairs, each batch padded to its longest source; "
                        "bucketed: batches of similar source length (buckets of "
                        "--bucket-width tokens), as NMT loaders do (default: %(default)s)")
    p.add_argument("--bucket-width", type=positive_int("--bucket-width"), default=1,
                   metavar="W", help="source-length width of a bucket (default: %(default)s)")
    p.add_argument("--max-len", type=positive_int("--max-len"), default=40, metavar="L",
                   help="truncate sentences to L tokens: caps the SL (default: %(default)s)")
    p.add_argument("--vocab", type=positive_int("--vocab"), default=2000, metavar="V",
                   help="most frequent words per language, the rest is <unk> (default: "
                        "%(default)s)")
    p.add_argument("--hidden", type=positive_int("--hidden"), default=64, metavar="H",
                   help="embedding and hidden size (default: %(default)s)")
    p.add_argument("--layers", type=positive_int("--layers"), default=1, metavar="N",
                   help="recurrent layers of encoder and decoder (default: %(default)s)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default: "
                                                          "%(default)s)")
    p.add_argument("--threads", type=positive_int("--threads"), default=1, metavar="T",
                   help="torch.set_num_threads (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1,
                   help="data order and initialisation (default: %(default)s)")
    p.add_argument("--slowdown-at", type=fraction, default=None, metavar="F",
                   help="from iteration F*N on, run a busy-loop process pinned to the "
                        "trainer's CPU (a real slowdown: wall time grows, CPU time does not); "
                        "the trainer is pinned to one CPU for the whole run")
    p.add_argument("--slowdown-file", default=None, metavar="FILE",
                   help="with --slowdown-at: do not start the busy loop; write the trainer's "
                        "CPU to FILE at that iteration, for a harness to start one there "
                        "(a process that is not the trainer's child: counters that follow "
                        "forks, like perf's, would count a child's CPU as the trainer's)")
    p.add_argument("--cpu", type=int, default=None,
                   help="with --slowdown-at: the CPU to pin to (default: the last CPU the "
                        "trainer may run on)")
    p.add_argument("--log-every", type=int, default=0, metavar="N",
                   help="print the mean loss every N iterations to stderr (0: never)")
    p.add_argument("--no-probe", action="store_true",
                   help="do not mark iterations through seqpoint_probe")
    p.add_argument("--ddp", action="store_true",
                   help="data-parallel: one rank of a job whose launcher set the rank and the "
                        "job's size (torchrun, srun, mpirun or examples/launch_ddp.py); "
                        "gradients all-reduced over gloo; --trace must contain {rank}")
    args = p.parse_args(argv)
    if args.ddp and "{rank}" not in args.trace:
        p.error("--ddp: every rank writes its own trace: put {rank} in --trace, e.g. "
                "--trace /tmp/run.rank{rank}.csv")
    if args.ddp and args.slowdown_at is not None:
        p.error("--slowdown-at applies to one process; it cannot be combined with --ddp")
    if args.lr <= 0:
        p.error("--lr must be positive, got %s" % args.lr)
    if args.log_every < 0:
        p.error("--log-every must be 0 (off) or positive, got %d" % args.log_every)
    if args.cpu is not None and args.slowdown_at is None:
        p.error("--cpu only applies with --slowdown-at")
    return args


# ---------------------------------------------------------------------------------- corpus

def read_corpus(path, max_len):
    """Returns a list of (english tokens, german tokens) byte-string lists."""
    if not os.path.exists(path):
        raise UsageError("cannot open corpus '%s': no such file; pass --corpus FILE (%s)" %
                         (path, FORMAT_HINT))
    if os.path.isdir(path):
        raise UsageError("corpus '%s' is a directory; pass --corpus FILE (%s)" %
                         (path, FORMAT_HINT))
    try:
        if path.endswith(".xz"):
            with lzma.open(path, "rb") as f:
                data = f.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except lzma.LZMAError as e:
        raise UsageError("corpus '%s' is not a valid .xz file (%s); %s" % (path, e, FORMAT_HINT))
    except OSError as e:
        raise UsageError("cannot read corpus '%s': %s; %s" % (path, e.strerror or e,
                                                             FORMAT_HINT))
    pairs = []
    for number, line in enumerate(data.split(b"\n"), 1):
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            continue
        fields = line.split(b"\t", 2)
        if len(fields) < 2:
            raise UsageError("%s:%d: no TAB between English and German; %s" %
                             (path, number, FORMAT_HINT))
        en, de = tokenize(fields[0]), tokenize(fields[1])
        if not en or not de:
            continue
        pairs.append((en[:max_len], de[:max_len]))
    if not pairs:
        raise UsageError("%s: no sentence pair with words on both sides; %s" % (path,
                                                                              FORMAT_HINT))
    return pairs


def build_vocab(sentences, max_words):
    counts = collections.Counter(w for s in sentences for w in s)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:max_words]
    return {w: i + 4 for i, (w, _) in enumerate(ranked)}  # 0..3: <pad> <unk> <s> </s>


def make_batches(lengths, batch, batching, bucket_width, rng):
    """One epoch of batches (lists of pair indices); every batch is full (drop_last), as in
    examples/batching.cpp, so that `batch` is constant and SL alone tells a batch's work."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches = []
    if batching == "random":
        for i in range(0, len(order) - batch + 1, batch):
            batches.append(order[i:i + batch])
    else:
        buckets = collections.defaultdict(list)
        for i in order:  # shuffled already: each bucket's order is random
            buckets[(lengths[i] - 1) // bucket_width].append(i)
        for key in sorted(buckets):
            members = buckets[key]
            for i in range(0, len(members) - batch + 1, batch):
                batches.append(members[i:i + batch])
        rng.shuffle(batches)
    return batches


# ------------------------------------------------------------------------------- slowdown

def pin_to_one_cpu(choice):
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1] if choice is None else choice
    if cpu not in allowed:
        raise UsageError("--cpu %d is not one this process may run on (allowed: %s)" %
                         (cpu, ",".join(map(str, allowed))))
    os.sched_setaffinity(0, {cpu})
    return cpu


_BUSY_LOOP = ("import os\n"
              "parent = os.getppid()\n"
              "while os.getppid() == parent:\n"  # ends by itself if the trainer dies
              "    for _ in range(200000):\n"
              "        pass\n")


def start_busy_loop():
    """A CPU-bound child process pinned to this process's CPU(s)."""
    cpus = os.sched_getaffinity(0)
    child = subprocess.Popen([sys.executable, "-S", "-c", _BUSY_LOOP],
                             stdin=subprocess.DEVNULL, close_fds=True)
    os.sched_setaffinity(child.pid, cpus)
    return child


def stop_busy_loop(child):
    if child is not None and child.poll() is None:
        child.kill()
        child.wait()


# ---------------------------------------------------------------------------------- probes

def load_probe(disabled):
    """seqpoint_probe from sdk/python beside this script, or None."""
    if disabled:
        return None
    sdk = os.path.join(REPO, "sdk", "python")
    if not os.path.isfile(os.path.join(sdk, "seqpoint_probe", "__init__.py")):
        return None
    built = os.path.join(REPO, "build", "sdk", "python", "seqpoint_probe", "libseqpoint_usdt.so")
    if "SEQPOINT_USDT_LIB" not in os.environ and os.path.isfile(built) and not os.path.isfile(
            os.path.join(sdk, "seqpoint_probe", "libseqpoint_usdt.so")):
        os.environ["SEQPOINT_USDT_LIB"] = built  # the library of this checkout's build
    sys.path.insert(0, sdk)
    try:
        import seqpoint_probe
    except Exception as e:  # observability never stops training
        print("train_torch: seqpoint_probe not usable (%s); iterations are not marked" % e,
              file=sys.stderr)
        return None
    finally:
        sys.path.remove(sdk)
    return seqpoint_probe if seqpoint_probe.available() else None


# ----------------------------------------------------------------------------------- model

def build_model(torch, cell, src_vocab, tgt_vocab, hidden, layers):
    nn = torch.nn

    class Seq2Seq(nn.Module):
        """Encoder-decoder with Luong "general" attention; the decoder starts from the masked
        mean of the encoder states. Padded positions are computed (no packing): the work of an
        iteration grows with the padded length, as in the C++ trainer."""

        def __init__(self):
            super().__init__()
            rnn = nn.GRU if cell == "gru" else nn.LSTM
            self.src_emb = nn.Embedding(src_vocab, hidden, padding_idx=PAD)
            self.tgt_emb = nn.Embedding(tgt_vocab, hidden, padding_idx=PAD)
            self.encoder = rnn(hidden, hidden, layers, batch_first=True)
            self.decoder = rnn(hidden, hidden, layers, batch_first=True)
            self.attn = nn.Linear(hidden, hidden, bias=False)
            self.combine = nn.Linear(2 * hidden, hidden)
            self.out = nn.Linear(hidden, tgt_vocab)

        def forward(self, src, tgt_in):
            mask = src != PAD                                          # B x S
            enc, _ = self.encoder(self.src_emb(src))                   # B x S x H
            m = mask.unsqueeze(2).to(enc.dtype)
            mean = (enc * m).sum(1) / m.sum(1)                         # B x H
            h0 = mean.unsqueeze(0).expand(layers, -1, -1).contiguous()
            state = h0 if cell == "gru" else (h0, torch.zeros_like(h0))
            dec, _ = self.decoder(self.tgt_emb(tgt_in), state)         # B x T x H
            scores = torch.bmm(dec, self.attn(enc).transpose(1, 2))    # B x T x S
            scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
            context = torch.bmm(torch.softmax(scores, dim=2), enc)     # B x T x H
            return self.out(torch.tanh(self.combine(torch.cat((dec, context), 2))))

    return Seq2Seq()


def pad_batch(torch, pairs, indices):
    src = [pairs[i][0] for i in indices]
    tgt = [pairs[i][1] for i in indices]
    s_len = max(len(s) for s in src)
    t_len = max(len(t) for t in tgt) + 1
    src_ids = torch.full((len(indices), s_len), PAD, dtype=torch.long)
    tgt_in = torch.full((len(indices), t_len), PAD, dtype=torch.long)
    tgt_out = torch.full((len(indices), t_len), PAD, dtype=torch.long)
    for row, (s, t) in enumerate(zip(src, tgt)):
        src_ids[row, :len(s)] = torch.tensor(s)
        tgt_in[row, :len(t) + 1] = torch.tensor([BOS] + t)
        tgt_out[row, :len(t) + 1] = torch.tensor(t + [EOS])
    tokens = sum(len(s) for s in src) + sum(len(t) for t in tgt)
    return src_ids, tgt_in, tgt_out, s_len, tokens


# ---------------------------------------------------------------------------- data-parallel

# (rank, world size) variables, in the order launchers are tried (torchrun, srun, mpirun, MPICH).
_RANK_ENV = (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"),
             ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"))


def launch_rank():
    """(rank, world size) as the launcher set them; UsageError when none did."""
    for rank_name, size_name in _RANK_ENV:
        rank, size = os.environ.get(rank_name), os.environ.get(size_name)
        if rank is None or size is None:
            continue
        try:
            r, n = int(rank), int(size)
        except ValueError:
            raise UsageError("--ddp: %s=%r and %s=%r are not integers" % (rank_name, rank,
                                                                        size_name, size))
        if n < 1 or not 0 <= r < n:
            raise UsageError("--ddp: rank %s=%d is not in [0, %s=%d)" % (rank_name, r,
                                                                       size_name, n))
        return r, n
    raise UsageError("--ddp: no launcher set this rank's number and the job's size (RANK and "
                     "WORLD_SIZE, SLURM_PROCID and SLURM_NTASKS, OMPI_COMM_WORLD_RANK and "
                     "OMPI_COMM_WORLD_SIZE, or PMI_RANK and PMI_SIZE); start the ranks with "
                     "torchrun, srun, mpirun or examples/launch_ddp.py")


def init_ddp(torch, rank, world):
    """gloo over TCP at MASTER_ADDR:MASTER_PORT (default 127.0.0.1:29500)."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    import datetime
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world,
                                         timeout=datetime.timedelta(seconds=120))


# ------------------------------------------------------------------------------------ main

def run(args):
    # Everything that can fail on input comes before torch and before the trace is touched.
    trace_dir = os.path.dirname(os.path.abspath(args.trace))
    if not os.path.isdir(trace_dir):
        raise UsageError("cannot write trace '%s': directory '%s' does not exist; create it "
                         "or pass another --trace" % (args.trace, trace_dir))
    if os.path.isdir(args.trace):
        raise UsageError("--trace '%s' is a directory; pass a file name" % args.trace)
    rank, world = launch_rank() if args.ddp else (0, 1)
    if args.ddp:
        args.trace = args.trace.replace("{rank}", str(rank))
    pairs_text = read_corpus(args.corpus, args.max_len)
    pinned = pin_to_one_cpu(args.cpu) if args.slowdown_at is not None else None

    import torch  # after parsing: --help and bad options start nothing

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)

    src_vocab = build_vocab((p[0] for p in pairs_text), args.vocab)
    tgt_vocab = build_vocab((p[1] for p in pairs_text), args.vocab)
    pairs = [([src_vocab.get(w, UNK) for w in en], [tgt_vocab.get(w, UNK) for w in de])
             for en, de in pairs_text]
    del pairs_text
    if len(pairs) < args.batch:
        raise UsageError("%s has %d usable pairs, fewer than --batch %d; pass a smaller "
                         "--batch" % (args.corpus, len(pairs), args.batch))
    lengths = [len(p[0]) for p in pairs]

    model = build_model(torch, args.model, len(src_vocab) + 4, len(tgt_vocab) + 4,
                        args.hidden, args.layers)
    if args.ddp:
        init_ddp(torch, rank, world)
        # Same seed on every rank: the same initial weights, which DDP also broadcasts.
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD)
    probe = load_probe(args.no_probe)

    slow_from = (None if args.slowdown_at is None
                 else int(args.slowdown_at * args.iterations))
    partial = args.trace + ".partial"
    try:
        out = open(partial, "w", buffering=1 << 20)
    except OSError as e:
        raise UsageError("cannot write trace '%s': %s; pass another --trace" %
                         (partial, e.strerror or e))
    out.write("# train_torch.py model=%s hidden=%d layers=%d vocab=%d+%d batching=%s "
              "bucket_width=%d batch=%d max_len=%d threads=%d seed=%d torch=%s\n" %
              (args.model, args.hidden, args.layers, len(src_vocab) + 4, len(tgt_vocab) + 4,
               args.batching, args.bucket_width, args.batch, args.max_len, args.threads,
               args.seed, torch.__version__))
    out.write("# corpus=%s pairs=%d; tokens = real source + target words; time_ns = "
              "perf_counter wall time, cpu_ns = process CPU time (process_time) of forward, "
              "backward, clipping, Adam step\n" % (os.path.basename(args.corpus), len(pairs)))
    out.write("# seqpoint_probe: %s\n" % ("iterations marked through " + probe.library_path()
                                          if probe is not None else "not loaded, unmarked"))
    if args.ddp:
        out.write("# ddp: rank %d of %d, gloo; batches %d, %d+%d, ... of the shared order; "
                  "mono_begin_ns/mono_end_ns: CLOCK_MONOTONIC around the same span as "
                  "time_ns\n" % (rank, world, rank, rank, world))
    if slow_from is not None:
        out.write("# slowdown: busy-loop process on CPU %d from iter %d on; trainer pinned "
                  "to CPU %d\n" % (pinned, slow_from, pinned))
    out.write("iter,seq_len,batch,tokens,time_ns,cpu_ns%s\n" %
              (",mono_begin_ns,mono_end_ns" if args.ddp else ""))

    busy = None
    completed = False
    epoch_batches = []
    total_wall = total_cpu = 0
    loss_sum, loss_n = 0.0, 0
    model.train()
    try:
        for it in range(args.iterations):
            if not epoch_batches:
                epoch_batches = make_batches(lengths, args.batch, args.batching,
                                             args.bucket_width, rng)
                epoch_batches.reverse()  # pop() from the end: the epoch's order
                if not epoch_batches:
                    raise UsageError("no full batch of %d pairs in %s; pass a smaller --batch"
                                     % (args.batch, args.corpus))
            if slow_from is not None and it == slow_from:
                if args.slowdown_file:
                    with open(args.slowdown_file + ".tmp", "w") as f:
                        f.write("%d\n" % pinned)
                    os.replace(args.slowdown_file + ".tmp", args.slowdown_file)
                else:
                    busy = start_busy_loop()
            # Each rank its own share of the shared order: rank r takes the r-th of every
            # `world` batches (the others' go by).
            while len(epoch_batches) < world:
                more = make_batches(lengths, args.batch, args.batching, args.bucket_width, rng)
                epoch_batches[:0] = more[::-1]
            mine = epoch_batches[-1 - rank]
            del epoch_batches[len(epoch_batches) - world:]
            # The padded batch is ready before the clock starts, as from a prefetching loader.
            src, tgt_in, tgt_out, seq_len, tokens = pad_batch(torch, pairs, mine)
            if probe is not None:
                probe.iteration_begin(it, seq_len, args.batch, tokens)
            m0 = time.monotonic_ns()
            c0 = time.process_time_ns()
            t0 = time.perf_counter_ns()
            optimizer.zero_grad(set_to_none=True)
            logits = model(src, tgt_in)
            loss = loss_fn(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            value = loss.item()
            t1 = time.perf_counter_ns()
            c1 = time.process_time_ns()
            m1 = time.monotonic_ns()
            if probe is not None:
                probe.iteration_end(it)
            out.write("%d,%d,%d,%d,%d,%d%s\n" % (it, seq_len, args.batch, tokens, t1 - t0,
                                                 c1 - c0,
                                                 ",%d,%d" % (m0, m1) if args.ddp else ""))
            total_wall += t1 - t0
            total_cpu += c1 - c0
            loss_sum += value
            loss_n += 1
            if args.log_every and (it + 1) % args.log_every == 0:
                print("iter %d loss %.4f" % (it + 1, loss_sum / loss_n), file=sys.stderr,
                      flush=True)
                loss_sum, loss_n = 0.0, 0
        completed = True
    finally:
        stop_busy_loop(busy)
        out.flush()
        out.close()
        if completed:
            os.replace(partial, args.trace)
    if args.ddp:
        torch.distributed.destroy_process_group()
    print("train_torch: %s %s iterations=%d total_time_s=%.3f total_cpu_s=%.3f trace=%s%s%s" %
          (args.model, args.batching, args.iterations, total_wall / 1e9, total_cpu / 1e9,
           args.trace, "" if slow_from is None else " slowdown_from_iter=%d" % slow_from,
           " rank=%d/%d" % (rank, world) if args.ddp else ""),
          flush=True)
    if args.ddp:
        # PyTorch 1.13's gloo group can deadlock in its destructors at interpreter exit (the
        # Reducer joins a gloo worker waiting for the GIL it holds): leave without them.
        sys.stderr.flush()
        os._exit(0)


# Set before torch loads (the C++ trainer's run-train.sh does the same): OpenBLAS starts its own
# threads, which torch.set_num_threads does not limit, and glibc's malloc would otherwise mmap
# and unmap every large tensor (page faults in every iteration). GLIBC_TUNABLES is read at
# process start only, so the trainer re-executes itself once with it.
_TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"


def set_environment(args, argv):
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if "GLIBC_TUNABLES" not in os.environ and sys.executable:
        os.environ["GLIBC_TUNABLES"] = _TUNABLES
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__)] + list(argv))


def main(argv):
    args = parse_args(argv)
    set_environment(args, argv)
    # SIGTERM unwinds like Ctrl-C, so the busy-loop child is killed and the partial trace kept.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        run(args)
    except UsageError as e:
        print("train_torch: error: %s" % e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("train_torch: interrupted; the rows so far are in %s.partial" % args.trace,
              file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
