//! The host picker: a runbook that runs on one host of a group, opened without naming the
//! host, opens the picker over the hosts the planner itself names.
//!
//! Owns: the app's side of the picker (when it opens, its keys). Must not: draw
//! (`panes::picker`) or plan (`open_runbook` does, for the host picked).

use crossterm::event::{KeyCode, KeyEvent};

use super::{App, Control, HostPicker, Overlay};

impl App {
    /// Open runbook `id` (in `env`, or as [`App::open_runbook`] picks it); a runbook that
    /// runs on one host of a group opens the host picker first, over the hosts the
    /// planner itself names, instead of refusing with "name it".
    pub fn open_runbook_or_pick(&mut self, id: &str, env: Option<&str>) {
        match self.host_choice(id, env) {
            Some(p) => {
                self.status = Some(format!(
                    "`{}` runs on one host of `{}` in {}: pick it (enter), esc cancels",
                    p.runbook, p.group, p.env
                ));
                self.overlay = Some(Overlay::HostPicker(Box::new(p)));
            }
            None => self.open_runbook(id, env, None),
        }
    }

    /// The picker for `id` when planning it without a host is refused for want of one:
    /// the planner's own list of the target group's hosts. `None`: anything else (it
    /// plans, or fails for another reason `open_runbook` will say).
    fn host_choice(&self, id: &str, env: Option<&str>) -> Option<HostPicker> {
        use hk_engine::runbook::plan::PlanError;
        use hk_session::PlanSourceError;
        if self.run_is_active() {
            return None;
        }
        let rb = self.runbook_set.get(id)?;
        // The environment as the session picks it (named, the current one, the only one).
        let env = match env {
            Some(e) => e.to_string(),
            None => match self.current_env.as_deref() {
                Some(c) if rb.environments.iter().any(|e| e == c) => c.to_string(),
                _ if rb.environments.len() == 1 => rb.environments[0].clone(),
                _ => return None,
            },
        };
        match self.plans.plan(rb, &env, None) {
            Err(PlanSourceError::Plan(PlanError::NoHostChosen { group, hosts, .. })) => {
                // The planner joins the group's members with ", " (host names hold no
                // comma or space).
                let hosts: Vec<String> = hosts
                    .split(", ")
                    .filter(|h| !h.is_empty())
                    .map(str::to_string)
                    .collect();
                (!hosts.is_empty()).then(|| HostPicker {
                    runbook: id.to_string(),
                    env,
                    group,
                    hosts,
                    sel: 0,
                })
            }
            _ => None,
        }
    }

    pub(super) fn picker_key(&mut self, mut p: Box<HostPicker>, key: KeyEvent) -> Control {
        match key.code {
            KeyCode::Esc => {
                self.status = Some(format!("`{}`: no host picked, nothing planned", p.runbook));
                return Control::Continue;
            }
            KeyCode::Enter => {
                if let Some(host) = p.selected().map(str::to_string) {
                    self.open_runbook(&p.runbook, Some(&p.env), Some(&host));
                }
                return Control::Continue;
            }
            KeyCode::Up | KeyCode::Char('k') => p.step(-1),
            KeyCode::Down | KeyCode::Char('j') => p.step(1),
            KeyCode::Home | KeyCode::Char('g') => p.sel = 0,
            KeyCode::End | KeyCode::Char('G') => p.step(isize::MAX / 2),
            _ => {}
        }
        self.overlay = Some(Overlay::HostPicker(p));
        Control::Continue
    }
}
