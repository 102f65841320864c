import { useState } from 'preact/hooks';
import type { Structure, StructureSet } from '../api/types.js';
import { useI18n } from '../i18n/index.js';
import { toggled } from '../lib/sets.js';

const MAX_SHOWN = 300;

/**
 * Structures of a submission: explicit structures and saved sets (spec: structure_ids and structure_set_ids, "Together
 * ... this is the whole list"; sets are expanded by the platform).
 */
export function StructurePicker(props: {
  structures: Structure[];
  sets: StructureSet[] | null;
  chosen: Set<string>;
  chosenSets: Set<string>;
  onChange: (chosen: Set<string>, chosenSets: Set<string>) => void;
  onSaveSet?: (name: string) => Promise<void>;
  error?: string | null;
}) {
  const { t } = useI18n();
  const [query, setQuery] = useState('');
  const [setName, setSetName] = useState('');
  const active = props.structures.filter((s) => !s.retired_at);
  const q = query.trim().toLowerCase();
  const shown = q
    ? active.filter((s) =>
        [s.code, s.district, s.format, s.address ?? ''].some((v) => v.toLowerCase().includes(q)),
      )
    : active;
  const toggle = (id: string) => props.onChange(toggled(props.chosen, id), props.chosenSets);
  const toggleSet = (id: string) => props.onChange(props.chosen, toggled(props.chosenSets, id));
  const chooseAllShown = () => {
    const next = new Set(props.chosen);
    for (const s of shown.slice(0, MAX_SHOWN)) next.add(s.id);
    props.onChange(next, props.chosenSets);
  };

  return (
    <fieldset class={`picker${props.error ? ' field-invalid' : ''}`}>
      <legend>{t('structures.legend')}</legend>
      <p class="picker-chosen" aria-live="polite">
        {t('structures.chosenCount', { count: props.chosen.size, sets: props.chosenSets.size })}
      </p>
      {props.sets && props.sets.length > 0 ? (
        <fieldset class="picker-sets">
          <legend class="picker-subtitle">{t('structures.savedSets')}</legend>
          {props.sets.map((set) => (
            <label class="choice" key={set.id}>
              <input
                type="checkbox"
                checked={props.chosenSets.has(set.id)}
                onChange={() => toggleSet(set.id)}
              />
              <span>
                {set.name}{' '}
                <small class="muted">{t('structures.setSize', { count: set.structure_ids.length })}</small>
              </span>
            </label>
          ))}
        </fieldset>
      ) : null}
      <label for="structure-search">{t('structures.search')}</label>
      <div class="inline">
        <input
          id="structure-search"
          type="search"
          value={query}
          placeholder={t('structures.searchPlaceholder')}
          onInput={(e) => setQuery((e.target as HTMLInputElement).value)}
          autocomplete="off"
        />
        <button type="button" class="button" onClick={chooseAllShown} disabled={shown.length === 0}>
          {t('structures.chooseShown')}
        </button>
        <button
          type="button"
          class="button button-quiet"
          onClick={() => props.onChange(new Set(), props.chosenSets)}
        >
          {t('structures.clear')}
        </button>
      </div>
      <fieldset class="picker-results picker-grid">
        <legend class="visually-hidden">{t('structures.list')}</legend>
        {shown.length === 0 ? <p>{t('structures.noMatch')}</p> : null}
        {shown.slice(0, MAX_SHOWN).map((s) => (
          <label class="choice" key={s.id}>
            <input type="checkbox" checked={props.chosen.has(s.id)} onChange={() => toggle(s.id)} />
            <span>
              <strong>{s.code}</strong>{' '}
              <small class="muted">
                {s.district} · {s.format}
                {s.address ? ` · ${s.address}` : ''}
              </small>
            </span>
          </label>
        ))}
        {shown.length > MAX_SHOWN ? (
          <p class="muted">{t('common.moreResults', { count: shown.length - MAX_SHOWN })}</p>
        ) : null}
      </fieldset>
      {props.onSaveSet && props.chosen.size > 0 ? (
        <div class="inline save-set">
          <label for="set-name">{t('structures.setName')}</label>
          <input
            id="set-name"
            value={setName}
            onInput={(e) => setSetName((e.target as HTMLInputElement).value)}
            maxLength={200}
          />
          <button
            type="button"
            class="button"
            disabled={setName.trim() === ''}
            onClick={async () => {
              await props.onSaveSet?.(setName.trim());
              setSetName('');
            }}
          >
            {t('structures.saveSet')}
          </button>
        </div>
      ) : null}
      {props.error ? <p class="field-error">{props.error}</p> : null}
    </fieldset>
  );
}
