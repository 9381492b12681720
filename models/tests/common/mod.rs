//! What the model tests share: random walks over a model's states.

use isr::sim::{Action, Cluster};
use isr_models::IsrModel;

/// A small deterministic generator for random walks.
pub struct Walk(pub u64);

impl Walk {
    pub fn pick(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    /// `runs` walks of up to `steps` steps each from the initial state, within the model's
    /// bounds; `visit` sees every state after a step.
    pub fn walks(
        &mut self,
        model: &IsrModel,
        runs: usize,
        steps: usize,
        mut visit: impl FnMut(&Cluster),
    ) {
        for _ in 0..runs {
            let mut c = model.initial();
            for _ in 0..steps {
                let actions: Vec<Action> = model
                    .enabled(&c)
                    .into_iter()
                    .filter(|a| model.within(&model.step(&c, a)))
                    .collect();
                if actions.is_empty() {
                    break;
                }
                c = model.step(&c, &actions[self.pick(actions.len())]);
                visit(&c);
            }
        }
    }
}
