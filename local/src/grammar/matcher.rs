//! A small GBNF recogniser for the tests: does a grammar accept a whole text? It reads the subset the generator
//! writes (rules, alternatives, groups, literals, character classes, `?` `*` `+` `{m}` `{m,}` `{m,n}`) and answers by
//! exploring every match end, so a test can check a grammar against texts without a model.

use std::collections::{BTreeSet, HashMap};

#[derive(Debug, Clone)]
enum Expr {
    Lit(Vec<char>),
    Class {
        neg: bool,
        ranges: Vec<(char, char)>,
    },
    Ref(String),
    Seq(Vec<Expr>),
    Alt(Vec<Expr>),
    Rep(Box<Expr>, usize, Option<usize>),
}

/// A parsed grammar.
pub struct Grammar {
    rules: HashMap<String, Expr>,
}

impl Grammar {
    /// Parses GBNF text.
    pub fn parse(text: &str) -> Result<Grammar, String> {
        let mut rules = HashMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (name, body) = line
                .split_once(" ::= ")
                .ok_or(format!("no ::= in {line:?}"))?;
            let chars: Vec<char> = body.chars().collect();
            let mut p = Parser { s: &chars, i: 0 };
            let e = p.alt()?;
            if p.i != chars.len() {
                return Err(format!("trailing text in rule {name}: {:?}", &body[p.i..]));
            }
            if rules.insert(name.trim().to_string(), e).is_some() {
                return Err(format!("rule {name} defined twice"));
            }
        }
        let g = Grammar { rules };
        for e in g.rules.values() {
            g.check_refs(e)?;
        }
        Ok(g)
    }

    fn check_refs(&self, e: &Expr) -> Result<(), String> {
        match e {
            Expr::Ref(r) if !self.rules.contains_key(r) => Err(format!("undefined rule {r}")),
            Expr::Seq(v) | Expr::Alt(v) => v.iter().try_for_each(|x| self.check_refs(x)),
            Expr::Rep(x, ..) => self.check_refs(x),
            _ => Ok(()),
        }
    }

    /// True when the `root` rule matches all of `text`.
    pub fn accepts(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let root = Expr::Ref("root".into());
        self.ends(&root, &chars, 0).contains(&chars.len())
    }

    fn ends(&self, e: &Expr, s: &[char], at: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        match e {
            Expr::Lit(l) => {
                if s.len() >= at + l.len() && s[at..at + l.len()] == l[..] {
                    out.insert(at + l.len());
                }
            }
            Expr::Class { neg, ranges } => {
                if let Some(c) = s.get(at) {
                    let inside = ranges.iter().any(|(a, b)| (*a..=*b).contains(c));
                    if inside != *neg {
                        out.insert(at + 1);
                    }
                }
            }
            Expr::Ref(r) => out = self.ends(&self.rules[r], s, at),
            Expr::Seq(v) => {
                let mut cur = BTreeSet::from([at]);
                for x in v {
                    cur = cur.iter().flat_map(|p| self.ends(x, s, *p)).collect();
                    if cur.is_empty() {
                        break;
                    }
                }
                out = cur;
            }
            Expr::Alt(v) => {
                for x in v {
                    out.extend(self.ends(x, s, at));
                }
            }
            Expr::Rep(x, min, max) => {
                if *min == 0 {
                    out.insert(at);
                }
                let mut frontier = BTreeSet::from([at]);
                let mut seen = BTreeSet::new();
                let mut n = 0;
                while !frontier.is_empty() && max.is_none_or(|m| n < m) {
                    let mut next: BTreeSet<usize> =
                        frontier.iter().flat_map(|p| self.ends(x, s, *p)).collect();
                    n += 1;
                    if n >= *min {
                        next.retain(|q| !seen.contains(q));
                        seen.extend(next.iter().copied());
                        out.extend(next.iter().copied());
                    }
                    frontier = next;
                }
            }
        }
        out
    }
}

struct Parser<'a> {
    s: &'a [char],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(|c| *c == ' ') {
            self.i += 1;
        }
    }

    fn alt(&mut self) -> Result<Expr, String> {
        let mut alts = vec![self.seq()?];
        loop {
            self.ws();
            if self.s.get(self.i) == Some(&'|') {
                self.i += 1;
                alts.push(self.seq()?);
            } else {
                break;
            }
        }
        Ok(if alts.len() == 1 {
            alts.remove(0)
        } else {
            Expr::Alt(alts)
        })
    }

    fn seq(&mut self) -> Result<Expr, String> {
        let mut items = Vec::new();
        loop {
            self.ws();
            match self.s.get(self.i) {
                None | Some('|') | Some(')') => break,
                _ => {
                    let atom = self.atom()?;
                    items.push(self.postfix(atom)?);
                }
            }
        }
        Ok(Expr::Seq(items))
    }

    fn postfix(&mut self, mut e: Expr) -> Result<Expr, String> {
        loop {
            match self.s.get(self.i) {
                Some('?') => e = Expr::Rep(Box::new(e), 0, Some(1)),
                Some('*') => e = Expr::Rep(Box::new(e), 0, None),
                Some('+') => e = Expr::Rep(Box::new(e), 1, None),
                Some('{') => {
                    let close = self.s[self.i..]
                        .iter()
                        .position(|c| *c == '}')
                        .ok_or("open {")?
                        + self.i;
                    let inner: String = self.s[self.i + 1..close].iter().collect();
                    let (min, max) = match inner.split_once(',') {
                        None => {
                            let n = inner.parse().map_err(|_| "bad {n}")?;
                            (n, Some(n))
                        }
                        Some((a, "")) => (a.parse().map_err(|_| "bad {m,}")?, None),
                        Some((a, b)) => (
                            a.parse().map_err(|_| "bad {m,n}")?,
                            Some(b.parse().map_err(|_| "bad {m,n}")?),
                        ),
                    };
                    e = Expr::Rep(Box::new(e), min, max);
                    self.i = close;
                }
                _ => return Ok(e),
            }
            self.i += 1;
        }
    }

    fn esc(&mut self) -> Result<char, String> {
        let c = *self.s.get(self.i).ok_or("dangling escape")?;
        self.i += 1;
        Ok(match c {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'x' => {
                let h: String = self.s[self.i..self.i + 2].iter().collect();
                self.i += 2;
                char::from_u32(u32::from_str_radix(&h, 16).map_err(|_| "bad \\x")?)
                    .ok_or("bad \\x")?
            }
            other => other,
        })
    }

    fn atom(&mut self) -> Result<Expr, String> {
        match self.s[self.i] {
            '"' => {
                self.i += 1;
                let mut lit = Vec::new();
                loop {
                    let c = *self.s.get(self.i).ok_or("open literal")?;
                    self.i += 1;
                    match c {
                        '"' => break,
                        '\\' => lit.push(self.esc()?),
                        c => lit.push(c),
                    }
                }
                Ok(Expr::Lit(lit))
            }
            '[' => {
                self.i += 1;
                let neg = self.s.get(self.i) == Some(&'^');
                if neg {
                    self.i += 1;
                }
                let mut ranges = Vec::new();
                loop {
                    let c = *self.s.get(self.i).ok_or("open class")?;
                    self.i += 1;
                    let lo = match c {
                        ']' => break,
                        '\\' => self.esc()?,
                        c => c,
                    };
                    let hi = if self.s.get(self.i) == Some(&'-')
                        && self.s.get(self.i + 1) != Some(&']')
                    {
                        self.i += 1;
                        let c = self.s[self.i];
                        self.i += 1;
                        if c == '\\' {
                            self.esc()?
                        } else {
                            c
                        }
                    } else {
                        lo
                    };
                    ranges.push((lo, hi));
                }
                Ok(Expr::Class { neg, ranges })
            }
            '(' => {
                self.i += 1;
                let e = self.alt()?;
                self.ws();
                if self.s.get(self.i) != Some(&')') {
                    return Err("open group".into());
                }
                self.i += 1;
                Ok(e)
            }
            c if c.is_ascii_alphanumeric() || c == '-' => {
                let start = self.i;
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '-')
                {
                    self.i += 1;
                }
                Ok(Expr::Ref(self.s[start..self.i].iter().collect()))
            }
            c => Err(format!("unexpected {c:?} at {}", self.i)),
        }
    }
}
