//! A list view's rows with its selection and scroll offset, the same for every list: the
//! fleet's rows, the queue's, the workloads', the sources' and the findings.

/// Rows of one list view, the selected one and the first shown.
#[derive(Debug, Clone)]
pub struct List<R> {
    pub rows: Vec<R>,
    pub selected: usize,
    pub offset: usize,
}

impl<R> Default for List<R> {
    fn default() -> Self {
        Self { rows: Vec::new(), selected: 0, offset: 0 }
    }
}

impl<R> List<R> {
    /// The selected row, if the list has it.
    pub fn current(&self) -> Option<&R> {
        self.rows.get(self.selected)
    }
}

/// What a list's row is to moving through it: a heading (a node in the fleet view) is
/// never selected, and a row right under one shows it too.
pub trait Heading {
    fn heading(&self) -> bool {
        false
    }
}

impl Heading for usize {}

impl Heading for crate::advisor::Finding {}

impl<R: Heading> List<R> {
    fn is_heading(&self, i: usize) -> bool {
        self.rows.get(i).is_some_and(Heading::heading)
    }

    /// Keep the selection in the list and in view, `visible` rows at a time.
    pub fn clamp(&mut self, visible: usize) {
        let len = self.rows.len();
        self.selected = self.selected.min(len.saturating_sub(1));
        // A row right under its heading shows the heading too.
        let top = match self.selected.checked_sub(1) {
            Some(above) if self.is_heading(above) && visible > 1 => above,
            _ => self.selected,
        };
        if top < self.offset {
            self.offset = top;
        } else if self.selected >= self.offset + visible {
            self.offset = self.selected + 1 - visible;
        }
        self.offset = self.offset.min(len.saturating_sub(visible));
    }

    /// Move the selection by `delta` rows, skipping headings, `visible` rows in view.
    pub fn step(&mut self, delta: isize, visible: usize) {
        let len = self.rows.len();
        if len == 0 {
            return;
        }
        let mut pos = (self.selected as isize + delta).clamp(0, len as isize - 1) as usize;
        let dir = if delta < 0 { -1 } else { 1 };
        while self.is_heading(pos) {
            let next = pos as isize + dir;
            if next < 0 || next >= len as isize {
                // Nothing beyond: turn around.
                pos = (pos as isize - dir).clamp(0, len as isize - 1) as usize;
                if self.is_heading(pos) && len > 1 {
                    pos = (pos as isize - dir).clamp(0, len as isize - 1) as usize;
                }
                break;
            }
            pos = next as usize;
        }
        self.selected = pos;
        self.clamp(visible);
    }

    /// Select shown row `y` (0 = the first shown), unless it is beyond the list or a heading.
    pub fn click(&mut self, y: usize, visible: usize) {
        let target = self.offset + y;
        if target < self.rows.len() && !self.is_heading(target) {
            self.selected = target;
            self.clamp(visible);
        }
    }
}
