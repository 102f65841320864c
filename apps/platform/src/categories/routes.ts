import { Category } from '@ooh/protocol';
import type { Feature } from '../context.js';
import { ItemsOf } from '../http/responses.js';
import { categories } from './catalogue.js';

export const categoriesFeature: Feature = {
  name: 'categories',
  // The taxonomy is public reference data: no credentials needed.
  apiPublic(app) {
    app.get(
      '/api/v1/categories',
      { schema: { response: { 200: ItemsOf(Category) } } },
      async (_request, reply) => {
        reply.header('cache-control', 'public, max-age=3600');
        return { items: categories().all };
      },
    );
  },
};
