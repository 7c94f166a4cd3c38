"""NNSmith's generator timed like convsmith's in bench/generate.py; run inside `.venv-nnsmith` (bench/nnsmith_env.sh).

    .venv-nnsmith/bin/python bench/nnsmith_gen.py --nodes 10 --seeds 60 [--warm 3]

Per seed, the steps of NNSmith's own `nnsmith.model_gen` command for a PyTorch model: generation (`model_gen` with
its default symbolic-cinit method, then `make_concrete`), materialization (`from_gir`), and the input search
(`refine_weights`, its gradient search of at most 20 ms, then `make_oracle`, one eager run). Prints one JSON line:
`{"version": ..., "rows": [[gen_s, mat_s, search_s], ...], "failed": N}`. Its operator set is the one NNSmith's
cached dtype probe gives (the first run makes the cache, before any timing).
"""

from __future__ import annotations

import argparse
import json
import random
import time
import warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--seeds", type=int, default=60)
    parser.add_argument("--warm", type=int, default=3, help="graphs made and not timed first")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    import nnsmith
    import numpy as np
    import torch
    from nnsmith.graph_gen import model_gen
    from nnsmith.materialize import Model
    from nnsmith.narrow_spec import auto_opset

    torch.set_num_threads(1)  # as convsmith's input search runs (generators/valid_inputs.py: _one_thread)
    model_type = Model.init("torch", backend_target="cpu")
    model_type.add_seed_setter()
    opset = auto_opset(model_type, None)

    def one(seed: int) -> list[float]:
        random.seed(seed)  # NNSmith draws from the global generators
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        t0 = time.perf_counter()
        ir = model_gen(opset=opset, method="symbolic-cinit", seed=seed, max_nodes=args.nodes).make_concrete()
        t1 = time.perf_counter()
        model = model_type.from_gir(ir)
        t2 = time.perf_counter()
        model.refine_weights()
        model.make_oracle()
        return [t1 - t0, t2 - t1, time.perf_counter() - t2]

    for seed in range(args.warm):
        one(seed)
    rows, failed = [], 0
    for seed in range(10_000, 10_000 + args.seeds):
        try:
            rows.append(one(seed))
        except Exception:  # a seed NNSmith cannot make is counted, not timed
            failed += 1
    print(json.dumps({"version": getattr(nnsmith, "__version__", "?"), "rows": rows, "failed": failed}))


if __name__ == "__main__":
    main()
