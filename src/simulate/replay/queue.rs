//! A run's queue: jobs of one shape (class, priority and request alike) wait in arrival
//! order, and each shape is served by its head.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

use crate::simulate::job::Job;

/// The queue: jobs of one shape wait in arrival order; shapes are served by their head.
#[derive(Debug, Default)]
pub(in crate::simulate) struct Queue {
    pub shape_of: Vec<u32>,
    pub shapes: Vec<BTreeSet<(i64, u32)>>,
    /// Per shape: class rank and priority (higher first).
    pub order: Vec<(u8, Reverse<i32>)>,
    pub len: u32,
}

/// How a shape's head is served: class rank, priority, arrival, id.
pub(super) type Head = (u8, Reverse<i32>, i64, u32);

type ShapeKey = (u8, Reverse<i32>, u32, u32, u64, u32, u64, Vec<Box<str>>);

impl Queue {
    pub(super) fn new(jobs: &[Job], exclusive: bool) -> Self {
        let mut q = Queue::default();
        let mut ids: HashMap<ShapeKey, u32> = HashMap::new();
        for j in jobs {
            let milli = if exclusive { 1000 } else { j.milli };
            let key = (
                j.class.rank(),
                Reverse(j.priority),
                j.gpus,
                milli,
                j.mem_mib,
                j.cpu_milli,
                j.host_mem_mib,
                j.models.clone(),
            );
            let next = ids.len() as u32;
            let id = *ids.entry(key).or_insert_with(|| {
                q.shapes.push(BTreeSet::new());
                q.order.push((j.class.rank(), Reverse(j.priority)));
                next
            });
            q.shape_of.push(id);
        }
        q
    }

    pub fn push(&mut self, id: u32, submit: i64) {
        self.shapes[self.shape_of[id as usize] as usize].insert((submit, id));
        self.len += 1;
    }

    pub fn remove(&mut self, id: u32, submit: i64) {
        if self.shapes[self.shape_of[id as usize] as usize].remove(&(submit, id)) {
            self.len -= 1;
        }
    }

    /// The key a shape's head is served by (`None`: nobody waits in it).
    pub(super) fn head(&self, shape: usize) -> Option<Head> {
        self.shapes[shape].first().map(|&(t, id)| (self.order[shape].0, self.order[shape].1, t, id))
    }

    /// Waiting jobs, best first: the head of each shape (and only heads).
    pub fn heads(&self) -> Vec<u32> {
        let mut h: Vec<Head> = (0..self.shapes.len()).filter_map(|s| self.head(s)).collect();
        h.sort_unstable();
        h.into_iter().map(|x| x.3).collect()
    }
}
