"""Q-learning's TD target: r + gamma * stop_gradient(max_a Q(s', a)), with a linear Q.

The squared TD error (target - Q(s, a))**2 depends on the weights twice: through Q(s, a)
and through the target's Q(s'). Q-learning (and DQN, which computes the target with
stop_gradient or a frozen copy of the network) treats the target as a fixed label, so the
gradient flows only through Q(s, a): the "semi-gradient". Differentiating through the
target as well (the "residual gradient") is a different algorithm.

Here Q(s) = s @ W, written inline, on a five-state chain: action 1 moves right, action 0
moves left, and moving right from the last state ends the episode with reward 1. With
one-hot states the linear Q is a table, and semi-gradient descent on all ten transitions
converges to Q*, computed by value iteration for comparison. The stop_gradient audit of
td_loss measures what the stopped target blocks: the residual gradient's extra part, which
for one transition is gamma times the semi-gradient's size (a share gamma / (1 + gamma)).

Run: python examples/td_target.py
"""

import argparse

import numpy as np

from symdiff import audit, grad, stop_gradient


def td_loss(W, s, a, r, s_next, done, gamma):
    """Half the mean squared TD error; the target is stopped. a holds one-hot actions."""
    q_sa = np.sum((s @ W) * a, axis=1)
    target = r + gamma * (1 - done) * stop_gradient(np.max(s_next @ W, axis=1))
    return 0.5 * np.mean(np.square(target - q_sa))


def residual_loss(W, s, a, r, s_next, done, gamma):
    """The same value with the target not stopped: its gradient also moves Q(s')."""
    q_sa = np.sum((s @ W) * a, axis=1)
    target = r + gamma * (1 - done) * np.max(s_next @ W, axis=1)
    return 0.5 * np.mean(np.square(target - q_sa))


N_STATES, GAMMA = 5, 0.9


def chain():
    """All ten transitions of the chain: one-hot s, a, s'; rewards; episode ends."""
    eye = np.eye(N_STATES)
    s, a, r, s_next, done = [], [], [], [], []
    for state in range(N_STATES):
        for action in (0, 1):
            nxt = max(state - 1, 0) if action == 0 else state + 1
            end = nxt == N_STATES
            s.append(eye[state])
            a.append(np.eye(2)[action])
            r.append(1.0 if end else 0.0)
            s_next.append(np.zeros(N_STATES) if end else eye[nxt])
            done.append(1.0 if end else 0.0)
    return tuple(np.array(v) for v in (s, a, r, s_next, done))


def value_iteration(gamma=GAMMA, sweeps=100):
    """Q* of the chain, by repeated Bellman optimality backups."""
    q = np.zeros((N_STATES, 2))
    for _ in range(sweeps):
        v = np.max(q, axis=1)
        left = gamma * v[np.maximum(np.arange(N_STATES) - 1, 0)]
        right = np.append(gamma * v[1:], 1.0)
        q = np.stack([left, right], axis=1)
    return q


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="gradient descent steps")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    W0 = 0.1 * rng.standard_normal((N_STATES, 2))
    s, a, r, s_next, done = chain()
    semi, residual = grad(td_loss, wrt="W"), grad(residual_loss, wrt="W")

    one = [v[5:6] for v in (s, a, r, s_next, done)]       # state 2, action right -> state 3
    print("gradient for the one transition state 2 --right--> state 3 (rows: states, "
          "columns: left, right):")
    print(f"  TD target stopped (Q-learning), only Q(2, right) moves:\n{semi(W0, *one, GAMMA)}")
    print(f"  target not stopped (residual gradient), Q(3, argmax) moves too:\n"
          f"{residual(W0, *one, GAMMA)}")
    report = audit(td_loss, W0, *one, GAMMA, wrt="W")
    print("\nthe target's stop_gradient blocks the residual part of the gradient (the Q(3, .) "
          "entry above): what Q-learning leaves out")
    print(report)

    W = W0
    for _ in range(args.steps):
        W = W - 5.0 * semi(W, s, a, r, s_next, done, GAMMA)  # each Q entry: half its TD error
    q_star = value_iteration()
    print(f"\nQ after {args.steps} semi-gradient steps on all ten transitions:\n{W}")
    print(f"Q* by value iteration:\n{q_star}")
    print(f"largest difference: {np.max(np.abs(W - q_star)):.1e}")
    return {"W0": W0, "one": one, "W": W, "q_star": q_star, "audit": report}


if __name__ == "__main__":
    main()
