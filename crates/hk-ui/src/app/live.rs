//! The live side: the sources' updates, what they say about a step's hosts, and the Live
//! screen's navigation.
//!
//! Owns: keeping the latest of each live pane ([`App::handle_update`]), the summary and its
//! next step (`x`), following the worst environment until the operator chooses one, the
//! blast radius a gate shows, and the Live screen's open, leave and scroll. Must not: take
//! a look or watch anything (the sources send updates on channels).

use hk_effects::observe::feed::Update;

use super::{App, Screen};

impl App {
    /// Why the gate of step `n` refuses to pass without an override, from the live blast
    /// radius of the hosts the step guards (`None`: nothing blocks, or no step, or the step
    /// changes no host).
    pub(super) fn live_refusal(&self, n: usize) -> Option<String> {
        hk_engine::guard::blast::refusal(&self.live_blast(n)?)
    }

    /// The live blast radius of the hosts step `n` of the open run changes, as the live
    /// panes show it now (`None`: no run, no such step, or it changes no host). What the
    /// gate shows and what its answer is refused on are this one reading.
    pub fn live_blast(&self, n: usize) -> Option<Vec<hk_engine::guard::blast::BlastLine>> {
        let plan = self.active.as_ref()?.run.plan();
        let hosts = hk_engine::guard::blast::gate_hosts(plan, n)?;
        let servers = self.servers_of(&plan.env);
        Some(self.live.blast(&plan.env, hosts, &servers, self.now))
    }

    /// The etcd members of `env`: its servers, as the repo names them.
    fn servers_of(&self, env: &str) -> Vec<String> {
        self.envs
            .iter()
            .find(|e| e.name == env)
            .map(|e| e.servers.clone())
            .unwrap_or_default()
    }

    /// Before the run starts: where its plan takes the environment's VIP holder and etcd
    /// leader, as the live panes see them now (issue 29; none when there is no run, it has
    /// started, or it changes fewer than two hosts), then what etcd's pre-flight refuses
    /// now (issue 39).
    pub fn holder_advice(&self) -> Vec<hk_engine::guard::blast::BlastLine> {
        let Some(a) = self.active.as_ref() else {
            return Vec::new();
        };
        if !matches!(
            a.run.status(),
            hk_engine::runbook::machine::RunStatus::NotStarted
        ) {
            return Vec::new();
        }
        let plan = a.run.plan();
        let mut order: Vec<String> = Vec::new();
        for s in plan.steps.iter().filter(|s| s.mutates) {
            if let Some(h) = &s.host {
                if !order.contains(h) {
                    order.push(h.clone());
                }
            }
        }
        let servers = self.servers_of(&plan.env);
        // Where the plan takes the holder, then what etcd's pre-flight refuses now.
        let mut out: Vec<_> = self
            .live
            .holder_in_order(&plan.env, &order, self.now)
            .into_iter()
            .collect();
        out.extend(
            self.live
                .plan_refusals(&plan.env, &order, &servers, self.now),
        );
        out
    }

    /// The environment the strip expands: the one a run is on during the run, else the
    /// selected one.
    pub fn strip_env(&self) -> Option<&str> {
        self.active
            .as_ref()
            .map(|a| a.run.plan().env.as_str())
            .or(self.current_env.as_deref())
    }

    /// Every environment at a glance, worst first, each verdict with its next step.
    pub fn summary(&self) -> hk_effects::observe::summary::Summary {
        let envs: Vec<_> = self
            .envs
            .iter()
            .map(|e| {
                (
                    e.name.clone(),
                    self.protected.contains(&e.name),
                    e.objects.as_ref(),
                )
            })
            .collect();
        let runbooks: Vec<&hk_engine::runbook::schema::Runbook> =
            self.runbook_set.iter().map(|l| &l.runbook).collect();
        let parity = match &self.check.findings {
            Some(Ok(f)) => Some(f.as_slice()),
            _ => None,
        };
        let objects = hk_effects::observe::summary::Objects::of(
            &hk_effects::cluster::WatchSettings::default(),
        );
        crate::live::summary(&self.live, &envs, parity, &runbooks, &objects, self.now)
    }

    /// `x`: take the next step of the worst environment that has one: open the runbook's
    /// plan for that environment (nothing runs until `s`), or say what to look at.
    pub(super) fn take_next_step(&mut self) {
        use hk_effects::observe::summary::NextStep;
        let s = self.summary();
        // On a run's screen its environment's verdicts come first (the pod a halted step
        // names); elsewhere the worst environment's.
        let run_env = self
            .active
            .as_ref()
            .filter(|_| self.screen == Screen::Run)
            .map(|a| a.run.plan().env.clone());
        let of_run = run_env.and_then(|r| {
            s.env(&r)
                .and_then(|e| e.first_next().map(|n| (e.env.clone(), n.clone())))
        });
        let Some((env, next)) = of_run.or_else(|| {
            s.envs
                .iter()
                .find_map(|e| e.first_next().map(|n| (e.env.clone(), n.clone())))
        }) else {
            self.status = Some("no verdict asks for a next step".into());
            return;
        };
        match next {
            NextStep::Runbook { id, env: on, .. } => self.open_runbook(&id, Some(&on), None),
            NextStep::Check { .. } => {
                self.open_check();
                self.status = Some(format!("{env}: the parity findings, file:line"));
            }
            NextStep::Look(l) => self.open_look(l),
        }
    }

    /// A live source's update: kept as the latest of its environment and kind (an update
    /// older than the one held changes nothing).
    pub fn handle_update(&mut self, update: Update) {
        let changed = self.timeline.observe(&update);
        // While a run is active, what changed goes into its record too.
        if let Some(a) = self.active.as_mut().filter(|_| !changed.is_empty()) {
            if let Err(e) = a.session.record_trail(&changed) {
                self.status = Some(format!("⚠ event trail not kept with the run: {e}"));
            }
        }
        if !self.live.apply(update) {
            tracing::debug!("live update older than the one held: ignored");
        }
        self.follow_the_worst();
    }

    /// Until the operator chooses an environment, the console looks at the one in the
    /// worst state: an environment turning critical while another is in view is brought into
    /// view (never during a run, never over the operator's own choice), and the status line
    /// says so.
    fn follow_the_worst(&mut self) {
        if self.env_chosen || self.active.is_some() {
            return;
        }
        let rank = |app: &App, env: &str| {
            crate::live::worst_of(app.live.env_verdicts(env).iter()).map(|s| s.rank())
        };
        let Some(worst) = self
            .envs
            .iter()
            .filter(|e| {
                rank(self, &e.name) == Some(hk_engine::checks::live::Severity::Critical.rank())
            })
            .map(|e| e.name.clone())
            .next()
        else {
            return;
        };
        let here = self.current_env.as_deref().and_then(|c| rank(self, c));
        if here == Some(hk_engine::checks::live::Severity::Critical.rank())
            || self.current_env.as_deref() == Some(worst.as_str())
        {
            return;
        }
        let from = self.current_env.clone().unwrap_or_default();
        self.current_env = Some(worst.clone());
        if let Some(i) = self.envs.iter().position(|e| e.name == worst) {
            self.env_sel = i;
        }
        self.live_scroll = 0;
        let said =
            format!("✗ {worst} is critical: showing {worst} (was {from}; e: next environment)");
        // The status line may hold what must be read first (the demo's SIMULATED notice, a
        // config warning): then this goes to the messages (M), and the header and strip show
        // the environment.
        if self.status.is_none() {
            self.status = Some(said);
        } else {
            self.keep_status();
            self.log_message(said);
        }
    }

    /// `l`: open the Live screen, or leave it.
    pub(super) fn toggle_live(&mut self) {
        if self.screen == Screen::Live {
            self.leave_live();
        } else {
            self.live_from = self.screen;
            self.screen = Screen::Live;
            self.live_scroll = 0;
        }
    }

    pub(super) fn leave_live(&mut self) {
        // A run opened from the Live screen (`:run`) is not left behind a stale return.
        self.screen = match self.live_from {
            Screen::Run if self.active.is_some() => Screen::Run,
            _ => Screen::Home,
        };
        if self.screen == Screen::Home {
            self.refresh_runs();
        }
    }

    /// Scroll the Live screen by `d` lines, within its content at the current width.
    pub(super) fn scroll_live(&mut self, d: isize) {
        let last = self.live_lines.get().saturating_sub(1);
        let next = self.live_scroll.saturating_add_signed(d);
        self.live_scroll = next.min(last);
    }
}
