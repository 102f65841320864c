import type { Category } from '@ooh/protocol';
import { useMemo, useState } from 'preact/hooks';
import { useI18n } from '../i18n/index.js';

const MAX_SHOWN = 40;

const fold = (text: string) => text.toLocaleLowerCase().normalize('NFKD').replace(/\p{M}/gu, '');

/**
 * Product category (IAB Ad Product Taxonomy 2.0, tiers 1 and 2; spec Submission category_id), searchable in all
 * three console languages whatever language the page is in.
 */
export function CategoryPicker(props: {
  categories: Category[];
  value: number | null;
  onChange: (id: number) => void;
  error?: string | null;
}) {
  const { t, language } = useI18n();
  const [query, setQuery] = useState('');
  const byId = useMemo(() => new Map(props.categories.map((c) => [c.id, c])), [props.categories]);
  const label = (c: Category) => {
    const parent = c.parent_id !== null ? byId.get(c.parent_id) : undefined;
    return parent ? `${parent.name[language]} › ${c.name[language]}` : c.name[language];
  };
  const index = useMemo(
    () =>
      props.categories.map((c) => {
        const parent = c.parent_id !== null ? byId.get(c.parent_id) : undefined;
        const names = [
          c.name.en,
          c.name.ru,
          c.name.kk,
          ...(parent ? [parent.name.en, parent.name.ru, parent.name.kk] : []),
        ];
        return { c, text: fold(names.join(' ')) };
      }),
    [props.categories, byId],
  );
  const words = fold(query.trim()).split(/\s+/).filter(Boolean);
  const found =
    words.length === 0 ? [] : index.filter((e) => words.every((w) => e.text.includes(w))).map((e) => e.c);
  const chosen = props.value !== null ? byId.get(props.value) : undefined;

  return (
    <fieldset class={`picker${props.error ? ' field-invalid' : ''}`}>
      <legend>{t('category.legend')}</legend>
      <p class="picker-chosen" aria-live="polite">
        {chosen ? t('category.chosen', { name: label(chosen) }) : t('category.none')}
      </p>
      <label for="category-search">{t('category.search')}</label>
      <input
        id="category-search"
        type="search"
        value={query}
        placeholder={t('category.searchPlaceholder')}
        onInput={(e) => setQuery((e.target as HTMLInputElement).value)}
        autocomplete="off"
      />
      {words.length > 0 ? (
        <fieldset class="picker-results">
          <legend class="visually-hidden">{t('category.results')}</legend>
          {found.length === 0 ? <p>{t('category.noMatch')}</p> : null}
          {found.slice(0, MAX_SHOWN).map((c) => (
            <label class="choice" key={c.id}>
              <input
                type="radio"
                name="category"
                value={String(c.id)}
                checked={props.value === c.id}
                onChange={() => props.onChange(c.id)}
              />
              <span>
                {label(c)} <small class="muted">{t('category.tier', { tier: c.tier })}</small>
              </span>
            </label>
          ))}
          {found.length > MAX_SHOWN ? (
            <p class="muted">{t('common.moreResults', { count: found.length - MAX_SHOWN })}</p>
          ) : null}
        </fieldset>
      ) : null}
      {props.error ? <p class="field-error">{props.error}</p> : null}
    </fieldset>
  );
}
