"""DDP: two processes under torchrun (gloo, CPU) iterate RANDOM and QUASI_RANDOM epochs with
distributed=True; their shares are disjoint (up to the documented padding) and cover the set.
Needs torch: skipped without it, except under scripts/test.sh (so CI), which installs torch and
sets BETON_REQUIRE_TORCH=1 so that a missing or broken torch fails the test."""

import os
import subprocess
import sys


def test_two_ranks_under_torchrun_cover_the_index_set_disjointly(small, tmp_path, torch):
    assert torch.distributed.is_available(), "this torch build has no torch.distributed"
    worker = os.path.join(os.path.dirname(__file__), "ddp_worker.py")
    # --standalone: a local rendezvous on a free port (a fixed port could be taken on a shared machine).
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           worker, str(small), str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for order in ("random", "quasi_random"):
        for epoch in range(2):
            shares = [(tmp_path / f"rank{r}-{order}-{epoch}.txt").read_text().split() for r in range(2)]
            shares = [[int(i) for i in s] for s in shares]
            assert len(shares[0]) == len(shares[1]), "ranks read as many samples"
            assert set(shares[0]) | set(shares[1]) == set(range(600))
            # RANDOM: 600 = 2 x 300, no padding. QUASI_RANDOM: disjoint pages, padding repeats a
            # rank's own samples. Either way no sample is read by both ranks.
            assert not set(shares[0]) & set(shares[1])
