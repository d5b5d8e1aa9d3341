"""How the worker shares the model: a batch takes the sentences of the request with the least
work left first, up to the budget of beam × tokens, a sentence over the budget alone, and a task
by itself; and the work done before each request is finished follows that order."""

from __future__ import annotations

from tiny_models import decode_settings

from tfm.serve.work_share import Job, Options, Part, next_batch, work_until_done


def job(*lengths: int, beam: int = 1, served: int = 0, task=None, options=None) -> Job:
    """A job of sources of these lengths (in tokens, </s> included), `served` work done."""
    sources = [[7] * n for n in lengths]
    texts = [f"s{i}" for i in range(len(lengths))]
    made = Job(texts, sources, options, beam, 0.0, None, None, task)
    made.served = served
    return made


def parts(batch: list[Part]) -> list[tuple[int, int, int]]:
    return [(id(part.job), part.start, part.stop) for part in batch]


def test_the_job_with_the_least_work_left_goes_first_and_the_budget_bounds_the_batch():
    heavy = job(4, 4, 4, served=4)
    heavy.found = ["done"]  # its first source is decoded: 8 left
    light = job(2)
    assert parts(next_batch([heavy, light], 4)) == [(id(light), 0, 1)]  # 2 + 4 is over 4
    assert parts(next_batch([heavy, light], 6)) == [(id(light), 0, 1), (id(heavy), 1, 2)]
    fresh = job(3, 3, beam=2)  # 6 a source: over the budget, taken alone
    assert parts(next_batch([job(7, 7), fresh], 4)) == [(id(fresh), 0, 1)]  # 12 left, not 14
    assert next_batch([fresh], 12)[0].cost == 12
    started = job(3, 3, 3, served=3)  # a heavy job half way ahead of a fresh one like it
    started.found = ["done"]
    assert parts(next_batch([job(3, 3, 3), started], 3)) == [(id(started), 1, 2)]


def test_ties_go_in_arrival_order_and_a_task_runs_alone():
    first, second = job(2, 2), job(4)
    assert parts(next_batch([first, second], 100)) == [(id(first), 0, 2), (id(second), 0, 1)]
    assert parts(next_batch([second, first], 100)) == [(id(second), 0, 1), (id(first), 0, 2)]
    task = job(4, task=lambda: "weights")
    assert parts(next_batch([task, first], 100)) == [(id(task), 0, 1)]
    assert parts(next_batch([first, task], 100)) == [(id(first), 0, 2)]  # the task waits


def test_the_work_until_each_job_is_done_follows_the_order_of_the_batches():
    heavy, light, other = job(8, 8), job(2), job(8, 8)
    heavy.served, heavy.found = 8, ["done"]  # 8 left
    until = work_until_done([other, heavy, light])
    assert [(id(j), work) for j, work in until] == [
        (id(light), 2), (id(heavy), 2 + 8), (id(other), 2 + 8 + 16)
    ]  # fmt: skip
    assert work_until_done([]) == []


def test_a_request_costs_the_hypotheses_its_strategy_keeps_of_a_sentence():
    assert Options(decode_settings()).beam == 1  # greedy
    assert Options(decode_settings(beam_size=4)).beam == 4
    assert Options(decode_settings(beam_size=4), n_best=2).beam == 4
    assert Options(decode_settings(temperature=0.5)).beam == 1
    assert Options(decode_settings(temperature=0.5), n_best=3).beam == 3  # a row a sample


def test_a_seeded_sampling_request_is_sliced_alone_whatever_else_waits():
    seeded, unseeded = Options(decode_settings(seed=3)), Options(decode_settings(top_k=5))
    drawn, light = job(2, 2, 2, options=seeded), job(1)
    assert parts(next_batch([light, drawn], 4)) == [(id(light), 0, 1)]  # it waits its turn
    later = job(4, 4)  # more work left than the seeded job: it waits for it
    assert parts(next_batch([later, drawn], 4)) == [(id(drawn), 0, 2)]  # which has it alone
    shared = job(2, 2, options=unseeded)  # no seed: its samples may share a batch
    assert parts(next_batch([light, shared], 4)) == [(id(light), 0, 1), (id(shared), 0, 1)]
