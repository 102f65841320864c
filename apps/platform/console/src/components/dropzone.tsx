import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { useI18n } from '../i18n/index.js';

/**
 * A file input whose button and "no file chosen" speak the console's language: the browser's own speak the
 * browser's (English in a Russian or Kazakh console), and on a phone it cuts its own text short ("No ...osen"). The
 * input stays the control (Tab reaches it, a screen reader names it by `labelledBy`, tests set its files); out of
 * sight, its second label is the button the mouse clicks, and shows the input's focus. As the public page's
 * (src/public/creative.tsx).
 */
export function FilePicker(props: {
  id: string;
  /** The id of the element that names the input (its visible label). */
  labelledBy: string;
  onFiles: (files: FileList | null | undefined) => void;
  accept?: string;
  multiple?: boolean;
  /** What was chosen, when the owner knows it (e.g. files dropped beside the picker). */
  chosen?: string | null;
}) {
  const { t } = useI18n();
  const [picked, setPicked] = useState<string | null>(null);
  const chosen = props.chosen !== undefined ? props.chosen : picked;
  return (
    <div class="file-picker">
      <input
        id={props.id}
        class="file-input"
        type="file"
        accept={props.accept}
        multiple={props.multiple}
        aria-labelledby={props.labelledBy}
        aria-describedby={`${props.id}-chosen`}
        onChange={(e) => {
          const files = (e.target as HTMLInputElement).files;
          setPicked(namesOf(files));
          props.onFiles(files);
        }}
      />
      <label for={props.id} class="button">
        {t(props.multiple ? 'file.chooseMany' : 'file.choose')}
      </label>
      <span class="muted file-name" id={`${props.id}-chosen`}>
        {chosen ?? t('file.none')}
      </span>
    </div>
  );
}

function namesOf(files: FileList | null | undefined): string | null {
  return files && files.length > 0 ? Array.from(files, (f) => f.name).join(', ') : null;
}

/**
 * A file input inside a drop target: the mouse drops files on the area, the keyboard and screen readers use the
 * labelled input. `onFiles` gets what was dropped or chosen.
 */
export function DropZone(props: {
  id: string;
  label: string;
  onFiles: (files: FileList | null | undefined) => void;
  accept?: string;
  multiple?: boolean;
  large?: boolean;
  testId?: string;
  /** Shown above the label (e.g. "Drop files here"). */
  children?: ComponentChildren;
}) {
  const [dragging, setDragging] = useState(false);
  const [chosen, setChosen] = useState<string | null>(null);
  const take = (files: FileList | null | undefined) => {
    setChosen(namesOf(files));
    props.onFiles(files);
  };
  return (
    // biome-ignore lint/a11y/noStaticElementInteractions: a drop target for the mouse; the file input inside is the keyboard and screen-reader way
    <div
      class={`dropzone${props.large ? ' dropzone-large' : ''}${dragging ? ' dropzone-active' : ''}`}
      data-testid={props.testId}
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDragging(false);
        take(e.dataTransfer?.files);
      }}
    >
      {props.children}
      <label for={props.id} id={`${props.id}-label`}>
        {props.label}
      </label>
      <FilePicker
        id={props.id}
        labelledBy={`${props.id}-label`}
        accept={props.accept}
        multiple={props.multiple}
        chosen={chosen}
        onFiles={take}
      />
    </div>
  );
}
