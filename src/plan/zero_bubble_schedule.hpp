// The zero-bubble schedules' action lists (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024):
// the backward of every (micro-batch, chunk) split into B (input gradient) and W (weight gradients).
//   zb-h1  hand-written, as the paper's ZB-H1: stage s runs 1F1B's warmup of p-s-1 forwards, then for
//          each micro-batch F, B, and the W of the micro-batch s backwards earlier (the last s Ws close
//          the list). s Ws held back on stage s fill the slots where 1F1B waits for gradients, and the
//          stage holds at most p micro-batches (1F1B's peak, on its stage 0): with F = B = W the
//          bubble is (p-1)/(3m+p-1), a third of 1F1B's.
//   zbv    found by a greedy list scheduler at given costs (F = B = W by default; the trainer re-plans
//          from measured ones, train/schedule_tuning), in the spirit of the paper's heuristic:
//          every stage, when free, takes a B whose gradient has arrived, else a forward whose input
//          has arrived while it holds fewer than 2p chunk activations (p stages' worth, 1F1B's peak),
//          else its oldest pending W, else it waits; the deeper chunk first; a second run keeps each
//          stage's last slot for its deeper chunk (the first can get stuck when Bs cost far more than
//          Fs), and the one that simulates faster at the costs is kept. The resulting order is fixed
//          and runs correctly at any real costs (a stage only blocks on receives, so an order the
//          simulation finishes never deadlocks).
// Every chunk's forwards, Bs and Ws each go through the micro-batches in order, so each weight
// gradient sums its micro-batches in the order 1F1B does.
#pragma once
#include <vector>

#include "plan/pipeline_schedule.hpp"

namespace dtrain {

StageActions zb_h1_actions(int p, int m, int stage);
// Every stage's list (one greedy run places all of them), ordered for these costs per chunk.
std::vector<StageActions> zbv_actions(int p, int m, const ActionCosts& costs = {});

}  // namespace dtrain
