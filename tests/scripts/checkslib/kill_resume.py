"""The kill-resume proof: the kills and restarts of kill_resume_adjacent.sh's plan."""
from .common import command, expect, load, load_lines


# ---- the kill-resume proof (kill_resume_adjacent.sh) ----

@command(("work", str))
def adjacent_kills(work):
    """kill-resume-proof's kills.jsonl and restarts.json for kill_resume_adjacent.sh's plan (a save
    kill during step_6's write, a step kill at 6, a save kill during step_10's write, a node loss
    at 10): one attempt per kill, in order (each kill after a save kill hits the attempt after it);
    both save kills interrupted their write; each save kill's next attempt resumed from the
    checkpoint before the interrupted one; the restarts resumed from step 4, 6, 8, 10, the last
    on 2 ranks of 3, each after a failed attempt."""
    kills = load_lines(f"{work}/kills.jsonl")
    restarts = load(f"{work}/restarts.json")["restarts"]
    expect([k["attempt"] for k in kills] == [0, 1, 2, 3], f"kills {kills}: expected attempts 0, 1, 2, 3")
    saves = [(k["interrupted"], k.get("outcome")) for k in kills if k["mode"] == "during-save"]
    expect(saves == [("step_00000006", "write interrupted"), ("step_00000010", "write interrupted")],
           f"save kills {saves}: expected the writes of step_00000006 and step_00000010 interrupted")
    expect(kills[0]["latest_at_kill"] == "step_00000004" and kills[2]["latest_at_kill"] == "step_00000008",
           f"latest checkpoints at the save kills {kills[0]['latest_at_kill']}, {kills[2]['latest_at_kill']}; "
           "expected step_00000004, step_00000008")
    resumed = [r["resumed_from"] for r in restarts]
    expect(resumed == ["step_00000004", "step_00000006", "step_00000008", "step_00000010"],
           f"restarts resumed from {resumed}")
    worlds = [(r["previous_world_size"], r["world_size"]) for r in restarts]
    expect(worlds == [(3, 3), (3, 3), (3, 3), (3, 2)], f"restart world sizes {worlds}, expected W 3 -> 2 at the last")
    expect(all(r["previous_exit_status"] != 0 for r in restarts),
           f"a restart after an attempt that exited 0: {[r['previous_exit_status'] for r in restarts]}")
    print(f"  kills in attempts {[k['attempt'] for k in kills]}; restarts from {resumed}, world sizes {worlds}")
