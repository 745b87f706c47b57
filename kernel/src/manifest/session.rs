//! `[session]`: the layered session chain.

use super::error::{index, join, Ctx, ManifestError};
use super::suggest::unknown_key_message;
use super::typed::{check_schema, want_name, wrong_type, Ty};

/// `[session]`: the chain of layers, top (sees the prompt) to bottom (storage).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSpec {
    /// The layers, top first. Never empty; the last one is a storage layer.
    pub layers: Vec<LayerSpec>,
    /// True when `[session]` was absent and the default chain applied.
    pub defaulted: bool,
}

/// One layer of the session chain.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerSpec {
    /// The session factory (`in-memory`, `compacting`, ... or an external provider).
    pub provider: String,
    /// The layer's config (every key but `provider`).
    pub config: toml::Table,
    /// True for storage layers (they retain events); false for pass-through layers. External layers are storage.
    pub storage: bool,
}

impl LayerSpec {
    pub(crate) fn builtin(provider: &str) -> LayerSpec {
        LayerSpec {
            provider: provider.to_string(),
            config: toml::Table::new(),
            storage: !matches!(builtin_layer(provider), Some((false, _))),
        }
    }
}

impl SessionSpec {
    /// The default chain: skills -> compacting -> in-memory.
    pub fn default_chain() -> SessionSpec {
        SessionSpec {
            layers: ["skills", "compacting", "in-memory"]
                .into_iter()
                .map(LayerSpec::builtin)
                .collect(),
            defaulted: true,
        }
    }
}

/// `(is storage, closed config schema)` of a builtin layer.
fn builtin_layer(provider: &str) -> Option<(bool, &'static [(&'static str, Ty)])> {
    Some(match provider {
        "in-memory" => (true, &[]),
        "file" => (true, &[("path", Ty::Str)]),
        "compacting" => (
            false,
            &[
                ("threshold", Ty::Count),
                ("token_fraction", Ty::Fraction),
                ("tokenFraction", Ty::Fraction),
                ("keep", Ty::Count),
                ("persist", Ty::Bool),
                ("summarizer", Ty::Str),
            ],
        ),
        "skills" => (
            false,
            &[
                ("root", Ty::Str),
                ("roots", Ty::StrList),
                ("bundled", Ty::Bool),
            ],
        ),
        "fork-of-parent" => (true, &[]),
        _ => return None,
    })
}

/// Builds and checks one layer whose config has already been gathered.
fn layer(
    ctx: Ctx<'_>,
    path: &str,
    provider: String,
    config: toml::Table,
) -> Result<LayerSpec, ManifestError> {
    let storage = match builtin_layer(&provider) {
        Some((storage, schema)) => {
            if provider == "skills" && config.contains_key("default_tools") {
                return Err(ctx
                    .err(
                        &join(path, "default_tools"),
                        "default_tools no longer exists: skills declare the tools they need themselves",
                    )
                    .with_hint("remove default_tools; a skill's loom.tools metadata (or loom.toml sidecar) declares its tools"));
            }
            check_schema(ctx, path, &config, schema)?;
            storage
        }
        None => true,
    };
    Ok(LayerSpec {
        provider,
        config,
        storage,
    })
}

/// A layer written as a table: `{ provider = "...", ...config }`.
fn table_layer(
    ctx: Ctx<'_>,
    path: &str,
    t: &toml::Table,
) -> Result<(String, toml::Table), ManifestError> {
    let provider = match t.get("provider") {
        Some(v) => want_name(ctx, &join(path, "provider"), v)?.to_string(),
        None => {
            return Err(ctx
                .err(
                    &join(path, "provider"),
                    "missing; every layer names its provider",
                )
                .with_hint("{ provider = \"in-memory\" }"))
        }
    };
    let mut config = t.clone();
    config.remove("provider");
    Ok((provider, config))
}

/// Parses the session table found at `path`.
pub(crate) fn parse_session(
    ctx: Ctx<'_>,
    path: &str,
    table: &toml::Table,
) -> Result<SessionSpec, ManifestError> {
    let layers = match (table.get("provider"), table.get("layers")) {
        (Some(_), Some(_)) => {
            return Err(ctx.err(path, "has both provider and layers").with_hint(
                "use provider = \"...\" for a one-layer session, or layers = [...] for a chain",
            ))
        }
        (Some(_), None) => {
            let (provider, config) = table_layer(ctx, path, table)?;
            vec![layer(ctx, path, provider, config)?]
        }
        (None, Some(v)) => layered(ctx, path, table, v)?,
        (None, None) => {
            // a misspelt `layers` or `provider` (`layer = [...]`) is named, not reported as missing
            if let Some(key) = table
                .iter()
                .filter(|(_, v)| !v.is_table())
                .map(|(k, _)| k)
                .find(|k| super::suggest::nearest(k, &["layers", "provider"]).is_some())
            {
                return Err(ctx.err(
                    &join(path, key),
                    unknown_key_message(key, &["layers", "provider"]),
                ));
            }
            return Err(ctx.err(path, "names no layers").with_hint(
                "layers = [\"skills\", \"compacting\", \"in-memory\"], or provider = \"in-memory\"",
            ));
        }
    };
    let layers_path = if table.contains_key("layers") {
        join(path, "layers")
    } else {
        path.to_string()
    };
    match layers.last() {
        None => {
            return Err(ctx
                .err(&layers_path, "is empty; every turn would see an empty history")
                .with_hint("end the chain with a storage layer such as \"in-memory\" or \"file\""))
        }
        Some(last) if !last.storage => {
            return Err(ctx
                .err(
                    &layers_path,
                    format!(
                        "the chain ends in the pass-through layer {:?}, so nothing stores events and every turn \
                         would see an empty history",
                        last.provider
                    ),
                )
                .with_hint("end the chain with a storage layer such as \"in-memory\" or \"file\""))
        }
        Some(_) => {}
    }
    Ok(SessionSpec {
        layers,
        defaulted: false,
    })
}

fn layered(
    ctx: Ctx<'_>,
    path: &str,
    table: &toml::Table,
    layers: &toml::Value,
) -> Result<Vec<LayerSpec>, ManifestError> {
    let layers_path = join(path, "layers");
    let items = layers.as_array().ok_or_else(|| {
        wrong_type(
            ctx,
            &layers_path,
            "an array of layer names or layer tables",
            layers,
        )
    })?;
    let all_strings = items.iter().all(toml::Value::is_str);
    let all_tables = items.iter().all(toml::Value::is_table);
    if !all_strings && !all_tables {
        let first_odd = items
            .iter()
            .position(|v| !v.is_str() && !v.is_table())
            .unwrap_or(0);
        return Err(ctx
            .err(
                &layers_path,
                if items.iter().any(|v| !v.is_str() && !v.is_table()) {
                    format!(
                        "layer {first_odd} is {}; layers are names or {{ provider = \"...\" }} tables",
                        crate::lattice::grant::type_name(&items[first_odd])
                    )
                } else {
                    "mixes names and tables".to_string()
                },
            )
            .with_hint(
                "write all names (layers = [\"compacting\", \"in-memory\"], configured with [session.compacting]) \
                 or all tables (layers = [{ provider = \"compacting\", threshold = 60 }, { provider = \"in-memory\" }])",
            ));
    }
    let mut gathered: Vec<(String, String, toml::Table)> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let p = index(&layers_path, i);
        match item {
            toml::Value::String(_) => gathered.push((
                p.clone(),
                want_name(ctx, &p, item)?.to_string(),
                toml::Table::new(),
            )),
            toml::Value::Table(t) => {
                let (provider, config) = table_layer(ctx, &p, t)?;
                gathered.push((p, provider, config));
            }
            _ => {}
        }
    }
    // Sibling tables [session.<name>] configure the named layer(s).
    for (key, v) in table {
        if key == "layers" {
            continue;
        }
        let sibling_path = join(path, key);
        let Some(sibling) = v.as_table() else {
            return Err(ctx
                .err(&sibling_path, unknown_key_message(key, &["layers"]))
                .with_hint(format!(
                    "configure a layer with a [{}] table",
                    join(path, "<layer name>")
                )));
        };
        let mut matched = false;
        for (layer_path, provider, config) in gathered.iter_mut() {
            if provider != key {
                continue;
            }
            matched = true;
            if config.is_empty() {
                // Errors in this layer's config point at the sibling table that holds it.
                layer_path.clone_from(&sibling_path);
            }
            for (ck, cv) in sibling {
                if config.contains_key(ck) {
                    return Err(ctx
                        .err(
                            &join(&sibling_path, ck),
                            format!("is configured twice, here and at {layer_path}"),
                        )
                        .with_hint("configure each layer key in one place"));
                }
                config.insert(ck.clone(), cv.clone());
            }
        }
        if !matched {
            let names: Vec<&str> = gathered.iter().map(|(_, p, _)| p.as_str()).collect();
            let mut err = ctx.err(
                &sibling_path,
                format!("configures the layer {key:?}, which is not in {layers_path}"),
            );
            err = match super::suggest::nearest(key, &names) {
                Some(s) => err.with_hint(format!("did you mean [{}]?", join(path, s))),
                None => err.with_hint(format!(
                    "add {key:?} to {layers_path} ({}), or remove [{sibling_path}]",
                    names.join(", ")
                )),
            };
            return Err(err);
        }
    }
    gathered
        .into_iter()
        .map(|(p, provider, config)| layer(ctx, &p, provider, config))
        .collect()
}
