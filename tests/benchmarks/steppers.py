"""Helpers the step benchmarks share."""


def v0_stepper(env):
    """One MallocGame-v0 step of the fixed policy (best fit, else skip; a reset when the episode
    ends), after 100 warm-up steps: the callable the step benchmarks time."""
    k = env.unwrapped.k
    state = {"obs": env.reset(seed=0)[0]}

    def one_step():
        obs = state["obs"]
        obs, _, done, _, _ = env.step(0 if obs["action_mask"][0] else k)
        state["obs"] = env.reset()[0] if done else obs

    for _ in range(100):
        one_step()
    return one_step
