//! The circles of an import graph: every set of siblings that import each
//! other round one, found by Tarjan's strongly connected components.

use std::collections::{BTreeMap, BTreeSet};

use super::{Edge, Module};

/// Every set of siblings that import each other round a circle (strongly
/// connected components of more than one module; Tarjan's algorithm).
pub fn circles(edges: &[Edge]) -> Vec<Vec<Module>> {
    let mut graph: BTreeMap<&Module, BTreeSet<&Module>> = BTreeMap::new();
    for e in edges {
        graph.entry(&e.from).or_default().insert(&e.to);
        graph.entry(&e.to).or_default();
    }
    struct Walk<'a> {
        graph: &'a BTreeMap<&'a Module, BTreeSet<&'a Module>>,
        index: BTreeMap<&'a Module, (usize, usize)>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Module) {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            self.on_stack.insert(v);
            for &w in &self.graph[v] {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.index[v].1.min(self.index[w].1);
                    self.index.get_mut(v).expect("visited").1 = low;
                } else if self.on_stack.contains(w) {
                    let low = self.index[v].1.min(self.index[w].0);
                    self.index.get_mut(v).expect("visited").1 = low;
                }
            }
            if self.index[v].0 == self.index[v].1 {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    scc.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut walk = Walk { graph: &graph, index: BTreeMap::new(), stack: Vec::new(), on_stack: BTreeSet::new(), out: Vec::new() };
    for &v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.out.sort();
    walk.out
}
